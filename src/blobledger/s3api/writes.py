"""A write of a key's document, as PutObject, CopyObject and a completed multipart upload
make it: a **create** when the key names no ready document, a **replace** of it at the
version found when it does; ``If-None-Match: *`` makes it a create only, ``If-None-Match``
with ETags a write unless the object's ETag is one of them, ``If-Match`` a replace only, at
the version whose ETag matches. The conditions fail as S3's ``PreconditionFailed`` (412),
also when another writer's create of the key or replace of its document got there first:
the bytes a condition was checked against are never overwritten."""

from __future__ import annotations

from collections.abc import AsyncIterable

from blobledger.errors import NameTaken, NotFound, PreconditionFailed
from blobledger.protocol.documents import Document
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import current_etag, find
from blobledger.s3api.rows import Shape
from blobledger.s3api.usermeta import recorder


def failed(header: str, why: str) -> S3Error:
    return S3Error("PreconditionFailed", f"At least one of the pre-conditions you specified "
                   f"did not hold ({header}: {why})", headers={"x-amz-condition": header})


def tags(text: str) -> list[str]:
    return [item.strip().removeprefix("W/") for item in text.split(",") if item.strip()]


async def find_ready(call: Call, key: str) -> Document | None:
    try:
        return await find(call, key)
    except NotFound:
        return None


def create_only(if_none_match: str | None) -> bool:
    """Whether a write's ``If-None-Match`` is ``*``: a create only."""
    return if_none_match is not None and if_none_match.strip() == "*"


async def target(call: Call, key: str, if_none_match: str | None,
                 if_match: str | None) -> Document | None:
    """The document a write of ``key`` replaces (None: it creates), its conditions checked
    against what the key names now: ``If-None-Match`` with ETags fails when the object's is
    one of them; ``If-Match`` on a key that names nothing is ``NoSuchKey``, as in S3."""
    if if_none_match is not None and if_match is not None:
        raise S3Error("NotImplemented", "If-None-Match and If-Match on one write")
    if create_only(if_none_match):
        return None
    existing = await find_ready(call, key)
    tag = None if existing is None else await current_etag(call, existing)
    if if_none_match is not None and tag is not None and tag in tags(if_none_match):
        raise failed("If-None-Match", "the object's ETag matches")
    if if_match is not None:
        if existing is None:
            raise S3Error("NoSuchKey", "The specified key does not exist.")
        wanted = tags(if_match)
        if "*" not in wanted and tag not in wanted:
            raise failed("If-Match", "the object's ETag differs")
    return existing


async def write(call: Call, key: str, data: AsyncIterable[bytes], *, content_type: str,
                meta: dict[str, str], sha256: str | None = None, md5: str | None = None,
                if_none_match: str | None = None, if_match: str | None = None,
                acl: str | None = None, shape: Shape | None = None) -> Document:
    """The create or replace of ``key``'s document with ``data``, ``meta`` and its canned
    ``acl`` (recorded with its blob before the document is visible, with the ``shape`` of a
    multipart object)."""
    existing = await target(call, key, if_none_match, if_match)
    ledger = call.ledger
    on_intent = recorder(call, meta, acl, shape)
    try:
        if existing is None:
            return await ledger.create(key, data, content_type=content_type, sha256=sha256,
                                       md5=md5, owner=call.owner, on_intent=on_intent,
                                       bucket=call.ledger_bucket)
        return await ledger.replace(existing.id, data, expected_version=existing.version,
                                    content_type=content_type, sha256=sha256, md5=md5,
                                    on_intent=on_intent)
    except NameTaken:
        if create_only(if_none_match):
            raise failed("If-None-Match", "the key names an object") from None
        raise
    except (PreconditionFailed, NotFound):
        if if_match is not None:  # replaced or deleted since: not the version it matched
            raise failed("If-Match", "the object changed") from None
        raise
