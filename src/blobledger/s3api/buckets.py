"""The bucket's operations on the ledger's buckets (docs/buckets.md): ListBuckets (those the
key reaches as its own, :mod:`.access`; ``max-buckets``, ``continuation-token``,
``prefix``), HeadBucket, CreateBucket (its ``x-amz-acl``; the key that creates a bucket owns
it) and DeleteBucket (a key with the ``admin`` scope, within its own buckets if it is
limited to some).

The default bucket goes by ``BLOBLEDGER_S3API_BUCKET`` here (:func:`~.call.ledger_bucket`);
a CreateBucket of a bucket the key already reaches as its own succeeds and changes nothing
(as in us-east-1, the region the endpoint answers for) unless it asks for another ACL than
the bucket's (``BucketAlreadyExists``, as ceph's RGW answers; us-east-1 would reset the
ACL), of one it does not (another key's, or outside its scope) is ``BucketAlreadyExists``;
a DeleteBucket of a bucket that holds any document (pending, held or ready) is
``BucketNotEmpty``."""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger.errors import BucketExists, BucketNotFound, InvalidInput
from blobledger.protocol.buckets import Bucket, in_scope
from blobledger.protocol.models import DEFAULT_BUCKET
from blobledger.s3api.access import canned_acl
from blobledger.s3api.call import Call, s3_bucket
from blobledger.s3api.errors import S3Error
from blobledger.s3api.objects import read_body
from blobledger.s3api.uploadlists import abort_uploads
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

#: the largest CreateBucketConfiguration body read
MAX_XML_BODY = 64 * 1024
#: the default bucket's creation date as ListBuckets shows it: it has always existed
CREATED = datetime(2024, 1, 1, tzinfo=UTC)
#: the most buckets one ListBuckets page holds (S3's own bound of ``max-buckets``)
MAX_BUCKETS = 10000


def _page_options(call: Call) -> tuple[int, str, str]:
    """ListBuckets' ``max-buckets`` (1 to 10000; all without it), the name its
    ``continuation-token`` (the last name of the page before, encoded) says to start
    after, and its ``prefix``."""
    text = call.params.get("max-buckets")
    if text is not None and (not text.isdigit() or not 1 <= int(text) <= MAX_BUCKETS):
        raise S3Error("InvalidArgument", f"max-buckets must be 1 to {MAX_BUCKETS}")
    token = call.params.get("continuation-token")
    after = ""
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise S3Error("InvalidArgument", "the continuation token is not one this "
                          "endpoint gave") from None
    return int(text) if text else MAX_BUCKETS, after, call.params.get("prefix", "")


async def list_buckets(call: Call) -> Response:
    """The buckets the key reaches as its own (:mod:`.access`; not those of another key,
    whatever their ACL), by name, a page at a time."""
    call.need("read")
    most, after, prefix = _page_options(call)
    owner = f"<Owner><ID>{call.signed.key_id}</ID><DisplayName>{call.signed.key_id}" \
            "</DisplayName></Owner>"
    alias = call.settings.s3api_bucket
    shown: list[tuple[str, Bucket]] = sorted(
        (name, bucket) for bucket in await call.ledger.buckets.list()
        if (name := s3_bucket(bucket.name, alias)) and call.access_to(bucket).own
        and name.startswith(prefix) and name > after)
    page, more = shown[:most], len(shown) > most
    items = []
    for name, bucket in page:
        created = CREATED if bucket.name == DEFAULT_BUCKET else bucket.created_at
        items.append(f"<Bucket><Name>{name}</Name><CreationDate>{iso(created)}"
                     "</CreationDate></Bucket>")
    following = ""
    if more:
        token = base64.urlsafe_b64encode(page[-1][0].encode()).decode()
        following = f"<ContinuationToken>{token}</ContinuationToken>"
    shown_prefix = f"<Prefix>{escape(prefix)}</Prefix>" if "prefix" in call.params else ""
    return xml_response(f'<ListAllMyBucketsResult xmlns="{NAMESPACE}">{owner}<Buckets>'
                        f"{''.join(items)}</Buckets>{following}{shown_prefix}"
                        "</ListAllMyBucketsResult>", call)


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
    acl = canned_acl(call.request.headers)
    created = Response(status_code=200, headers=call.headers(Location=f"/{call.bucket}"))
    for _ in range(2):
        try:
            existing = await call.ledger.buckets.get(name)
        except BucketNotFound:
            pass
        else:
            return _again(call, existing, acl, created)
        try:
            await call.ledger.buckets.create(name, acl=acl or "private",
                                             owner=call.signed.key_id)
        except BucketExists:
            if not in_scope(name):
                raise S3Error("BucketAlreadyExists", "the requested bucket name is not "
                              "available") from None
            continue  # created meanwhile, within the key's reach: judged as one that was
        except InvalidInput as exc:
            raise S3Error("InvalidBucketName", str(exc)) from None
        return created
    raise S3Error("OperationAborted", "the bucket was created and deleted meanwhile: retry")


def _again(call: Call, existing: Bucket, acl: str | None, created: Response) -> Response:
    """A CreateBucket of a bucket that exists: us-east-1's 200, nothing changed, when the key
    reaches it as its own and asks for the ACL it has (none asked: ``private``);
    ``BucketAlreadyExists`` for another key's, or for another ACL (nothing changed)."""
    if not call.access_to(existing).own:
        raise S3Error("BucketAlreadyExists", "the requested bucket name is not available: "
                      "another key owns it")
    if (acl or "private") != existing.acl:
        raise S3Error("BucketAlreadyExists", f"the bucket exists with the ACL "
                      f"{existing.acl!r}: change it with PutBucketAcl")
    return created


async def delete_bucket(call: Call) -> Response:
    """The ledger's bucket removed, only while it holds no document; its multipart uploads
    in progress aborted first, as S3 does."""
    call.need("admin", own=True)
    if call.ledger_bucket == DEFAULT_BUCKET:
        raise S3Error("AccessDenied", "the default bucket cannot be deleted")
    await abort_uploads(call)
    try:
        await call.ledger.buckets.delete(call.ledger_bucket)
    except BucketNotFound:
        raise S3Error("NoSuchBucket", "The specified bucket does not exist") from None
    return Response(status_code=204, headers=call.headers())
