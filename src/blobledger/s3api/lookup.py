"""What every object operation looks up: the ready document a key names (and whether the
caller may read it), and its ETag and date as S3 shows them."""

from __future__ import annotations

import hashlib
from datetime import datetime
from email.utils import format_datetime, parsedate_to_datetime

from blobledger._base.names import check_name_prefix
from blobledger.errors import InvalidInput, NotFound
from blobledger.protocol.documents import Document
from blobledger.s3api.access import Access, missing
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.rows import Shape, acl_of, shape_of


def etag_of(doc: Document, shape: Shape | None = None) -> str:
    """The object's ETag, quoted, as S3's: a multipart object's (``shape``) the MD5 of its
    parts' MD5s and their number, another's the MD5 of its bytes. A version without a
    recorded MD5 (the sweeper's roll-forward of a store that kept none) has the first 128
    bits of its SHA-256, or of one of its id and version."""
    if shape is not None:
        return f'"{shape.etag}"'
    if doc.md5:
        return f'"{doc.md5}"'
    digest = doc.sha256 or hashlib.sha256(f"{doc.id}:{doc.version}".encode()).hexdigest()
    return f'"{digest[:32]}"'


async def current_etag(call: Call, doc: Document) -> str:
    """The ETag of ``doc`` as S3 shows it (its shape read when it has one)."""
    return etag_of(doc, await shape_of(call.ledger, doc.blob))


def http_date(when: datetime) -> str:
    return format_datetime(when.replace(microsecond=0), usegmt=True)


def http_since(text: str | None) -> datetime | None:
    """An HTTP date header's value (None: absent or not a date, which S3 ignores)."""
    if text is None:
        return None
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None


async def find(call: Call, key: str, bucket: str | None = None) -> Document:
    """The ready document named ``key`` in the request's bucket (or the ledger's ``bucket``)
    (NotFound: none). The name itself sorts first among the names it prefixes, so one row
    of the ledger's listing answers."""
    if not key:
        raise NotFound("no key")
    try:
        check_name_prefix(key)
    except InvalidInput:  # a character no name holds: the URI names no key at all
        raise S3Error("InvalidURI", "Couldn't parse the specified URI.") from None
    found = await call.ledger.page(prefix=key, limit=1,
                                   bucket=call.ledger_bucket if bucket is None else bucket)
    if not found or found[0].name != key:
        raise NotFound(f"no document {key!r}")
    return found[0]


async def readable(call: Call, key: str, granted: Access | None = None) -> Document:
    """The ready document named ``key`` in the bucket of ``granted`` (the request's access
    unless given), if the caller may read it: by its key's scopes on a bucket it reaches
    as its own, else by the object's canned ACL (the bucket's when it has none of its
    own). A key that names nothing is ``NoSuchKey`` only to a caller who may list the
    bucket; ``AccessDenied`` to another, as for an object it may not read."""
    granted = granted or call.access
    assert granted is not None  # the request's bucket is looked up before its handler
    if granted.own:
        if "read" not in granted.scopes:
            raise S3Error("AccessDenied", "Access Denied: the key lacks the 'read' scope")
        return await find(call, key, granted.bucket.name)
    try:
        doc = await find(call, key, granted.bucket.name)
    except NotFound as exc:
        raise missing(granted, exc) from None
    if not granted.reads(await acl_of(call.ledger, doc.blob)):
        raise S3Error("AccessDenied", "Access Denied")
    return doc
