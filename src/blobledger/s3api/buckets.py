"""The bucket's operations: ListBuckets and HeadBucket for the one bucket, and CreateBucket of
it (already yours)."""

from __future__ import annotations

from datetime import UTC, datetime

from defusedxml import ElementTree
from starlette.responses import Response

from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.objects import read_body
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

#: the largest CreateBucketConfiguration body read
MAX_XML_BODY = 64 * 1024
#: the bucket's creation date as ListBuckets shows it: it has always existed
CREATED = datetime(2024, 1, 1, tzinfo=UTC)


async def list_buckets(call: Call) -> Response:
    call.need("read")
    owner = f"<Owner><ID>{call.signed.key_id}</ID><DisplayName>{call.signed.key_id}" \
            "</DisplayName></Owner>"
    return xml_response(f'<ListAllMyBucketsResult xmlns="{NAMESPACE}">{owner}<Buckets><Bucket>'
                f"<Name>{call.settings.s3api_bucket}</Name><CreationDate>{iso(CREATED)}"
                "</CreationDate></Bucket></Buckets></ListAllMyBucketsResult>", call)


async def head_bucket(call: Call) -> Response:
    call.need("read")
    return Response(status_code=200, headers=call.headers(**{"x-amz-bucket-region":
                                                             "us-east-1"}))


async def create_bucket(call: Call) -> Response:
    """The one bucket exists: a CreateBucket of it is ``BucketAlreadyOwnedByYou`` once its
    configuration, if any, parses (untrusted XML: defusedxml refuses entities and DTDs)."""
    call.need("write")
    body = b"".join([chunk async for chunk in read_body(call, MAX_XML_BODY)])
    if body.strip():
        try:
            root = ElementTree.fromstring(body)
        except Exception:  # defusedxml's refusals and expat's parse errors alike
            raise S3Error("MalformedXML", "the XML you provided was not well-formed") from None
        if not root.tag.endswith("CreateBucketConfiguration"):
            raise S3Error("MalformedXML", "expected a CreateBucketConfiguration")
    raise S3Error("BucketAlreadyOwnedByYou", "the bucket exists and is yours")
