"""GetBucketAcl, PutBucketAcl, GetObjectAcl, PutObjectAcl: canned ACLs only (private,
public-read, public-read-write, authenticated-read), each shown as S3's grants with the
owner's FULL_CONTROL (:mod:`.access`).

A bucket's ACL is its setting (``blobledger buckets change --acl``, ``PATCH /buckets``
say the same); an object's is kept with the version it names (``s3_objects``). Only a key
that reaches the bucket as its own reads or changes them: ``read`` to read, ``admin`` to
change a bucket's, ``write`` to change an object's."""

from __future__ import annotations

from starlette.responses import Response

from blobledger.errors import NotFound
from blobledger.s3api.access import acl_of_policy, canned_acl, owner_id, policy_xml
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import find
from blobledger.s3api.objects import read_body
from blobledger.s3api.rows import acl_of, set_acl
from blobledger.s3api.xmlbody import NAMESPACE, xml_response

#: the largest AccessControlPolicy body read
MAX_XML_BODY = 64 * 1024


def _answer(call: Call, acl: str) -> Response:
    assert call.access is not None
    owner = owner_id(call.access.bucket, call.signed)
    return xml_response(f'<AccessControlPolicy xmlns="{NAMESPACE}">'
                        f"{policy_xml(owner, acl)}</AccessControlPolicy>", call)


async def _requested(call: Call) -> str:
    """The canned ACL a Put*Acl asks for: ``x-amz-acl``, or an ``AccessControlPolicy``
    body that states one."""
    acl = canned_acl(call.request.headers)
    body = b"".join([chunk async for chunk in read_body(call, MAX_XML_BODY)])
    if acl is not None:
        if body.strip():
            raise S3Error("InvalidRequest", "an ACL is given by x-amz-acl or by the body, "
                          "not both")
        return acl
    if not body.strip():
        raise S3Error("MissingSecurityHeader", "Your request was missing a required header: "
                      "x-amz-acl or an AccessControlPolicy")
    assert call.access is not None
    return acl_of_policy(body, owner_id(call.access.bucket, call.signed))


async def get_bucket_acl(call: Call) -> Response:
    call.need("read", own=True)
    assert call.access is not None
    return _answer(call, call.access.bucket.acl)


async def put_bucket_acl(call: Call) -> Response:
    """The bucket's canned ACL changed, as ``PATCH /buckets/{bucket}`` changes it."""
    call.need("admin", own=True)
    acl = await _requested(call)
    await call.ledger.buckets.update(call.ledger_bucket, acl=acl)
    return Response(status_code=200, headers=call.headers())


async def get_object_acl(call: Call) -> Response:
    call.need("read", own=True)
    try:
        doc = await find(call, call.key)
    except NotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.") from None
    assert call.access is not None
    return _answer(call, await acl_of(call.ledger, doc.blob) or call.access.bucket.acl)


async def put_object_acl(call: Call) -> Response:
    """The canned ACL of the object's version found now (its bytes, dates and ETag stay)."""
    call.need("write", own=True)
    acl = await _requested(call)
    try:
        doc = await find(call, call.key)
    except NotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.") from None
    await set_acl(call.ledger, doc.blob, acl)
    return Response(status_code=200, headers=call.headers())
