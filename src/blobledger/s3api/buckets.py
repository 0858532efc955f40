"""The bucket's operations on the ledger's buckets (docs/buckets.md): ListBuckets (those the
key reaches), HeadBucket, CreateBucket and DeleteBucket (a key with the ``admin`` scope,
within its own buckets if it is limited to some).

The default bucket goes by ``BLOBLEDGER_S3API_BUCKET`` here (:func:`~.call.ledger_bucket`);
a CreateBucket of a bucket the key already reaches succeeds and changes nothing (as in
us-east-1, the region the endpoint answers for), of one it does not is
``BucketAlreadyExists``; a DeleteBucket of a bucket that holds any document (pending, held
or ready) is ``BucketNotEmpty``."""

from __future__ import annotations

from datetime import UTC, datetime

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger.errors import BucketExists, BucketNotFound, InvalidInput
from blobledger.protocol.buckets import in_scope
from blobledger.protocol.models import DEFAULT_BUCKET
from blobledger.s3api.call import Call, s3_bucket
from blobledger.s3api.errors import S3Error
from blobledger.s3api.objects import read_body
from blobledger.s3api.uploadlists import abort_uploads
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

#: the largest CreateBucketConfiguration body read
MAX_XML_BODY = 64 * 1024
#: the default bucket's creation date as ListBuckets shows it: it has always existed
CREATED = datetime(2024, 1, 1, tzinfo=UTC)


async def list_buckets(call: Call) -> Response:
    call.need("read")
    owner = f"<Owner><ID>{call.signed.key_id}</ID><DisplayName>{call.signed.key_id}" \
            "</DisplayName></Owner>"
    alias = call.settings.s3api_bucket
    items = []
    for bucket in await call.ledger.buckets.list():
        name = s3_bucket(bucket.name, alias)
        if name:
            created = CREATED if bucket.name == DEFAULT_BUCKET else bucket.created_at
            items.append(f"<Bucket><Name>{name}</Name><CreationDate>{iso(created)}"
                         "</CreationDate></Bucket>")
    return xml_response(f'<ListAllMyBucketsResult xmlns="{NAMESPACE}">{owner}<Buckets>'
                        f"{''.join(items)}</Buckets></ListAllMyBucketsResult>", call)


async def head_bucket(call: Call) -> Response:
    call.need("read")
    return Response(status_code=200, headers=call.headers(**{"x-amz-bucket-region":
                                                             "us-east-1"}))


async def create_bucket(call: Call) -> Response:
    """A new bucket, with the deployment's settings (``blobledger buckets`` and the HTTP
    API set a bucket's own); its configuration, if any, parsed first (untrusted XML:
    defusedxml refuses entities and DTDs)."""
    body = b"".join([chunk async for chunk in read_body(call, MAX_XML_BODY)])
    if body.strip():
        try:
            root = ElementTree.fromstring(body)
        except Exception:  # defusedxml's refusals and expat's parse errors alike
            raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
        if not root.tag.endswith("CreateBucketConfiguration"):
            raise S3Error("MalformedXML", "expected a CreateBucketConfiguration")
    name = call.ledger_bucket
    if not name:
        raise S3Error("BucketAlreadyExists", "the requested bucket name is not available")
    call.need("admin")
    created = Response(status_code=200, headers=call.headers(Location=f"/{call.bucket}"))
    try:
        await call.ledger.buckets.get(name)
    except BucketNotFound:
        pass
    else:  # it exists and the key reaches it: us-east-1's 200, and nothing changes
        return created
    try:
        await call.ledger.buckets.create(name)
    except BucketExists:
        if in_scope(name):  # created meanwhile, within the key's reach
            return created
        raise S3Error("BucketAlreadyExists", "the requested bucket name is not available") \
            from None
    except InvalidInput as exc:
        raise S3Error("InvalidBucketName", str(exc)) from None
    return created


async def delete_bucket(call: Call) -> Response:
    """The ledger's bucket removed, only while it holds no document; its multipart uploads
    in progress aborted first, as S3 does."""
    call.need("admin")
    if call.ledger_bucket == DEFAULT_BUCKET:
        raise S3Error("AccessDenied", "the default bucket cannot be deleted")
    await abort_uploads(call)
    try:
        await call.ledger.buckets.delete(call.ledger_bucket)
    except BucketNotFound:
        raise S3Error("NoSuchBucket", "The specified bucket does not exist") from None
    return Response(status_code=204, headers=call.headers())
