"""User metadata (``x-amz-meta-*``) and the headers S3 keeps with an object (``Cache-Control``,
``Content-Disposition``, ``Content-Encoding``, ``Content-Language``, ``Expires``): read from a
write's headers (user metadata within S3's limit), kept with the blob it was written with
(:mod:`.rows`), answered on GET and HEAD."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping

from blobledger.protocol.transitions.records import Intent
from blobledger.s3api.call import Call
from blobledger.s3api.errors import S3Error
from blobledger.s3api.rows import Shape, record_meta

PREFIX = "x-amz-meta-"
#: the headers of a write S3 keeps with the object and answers on GET and HEAD
KEPT = ("Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language",
        "Expires")
#: a kept header's name in the object's metadata row: ``:`` and its name (no header name,
#: so no user metadata's, holds a colon)
KEPT_MARK = ":"
#: S3's limit: the names (without the prefix) and values of one object, in UTF-8 bytes
MAX_BYTES = 2 * 1024


def as_sent(value: str) -> str:
    """A header's value read as Latin-1 (as HTTP servers do), read again as UTF-8 when its
    bytes are UTF-8 (how botocore sends and signs a non-ASCII value)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request's user metadata, names lower-cased without the prefix (``MetadataTooLarge``
    past 2 KB, as S3), and its kept headers (:data:`KEPT`, under :data:`KEPT_MARK`)."""
    meta = {name.removeprefix(PREFIX): as_sent(value.strip()) for name, value in
            headers.items() if name.lower().startswith(PREFIX)}
    size = sum(len(name.encode()) + len(value.encode()) for name, value in meta.items())
    if size > MAX_BYTES:
        raise S3Error("MetadataTooLarge", f"your metadata headers exceed the maximum allowed "
                      f"metadata size ({size} of at most {MAX_BYTES} bytes)")
    for name in meta:
        if not name or not name.isascii() or not name.isprintable():
            raise S3Error("InvalidArgument", f"not a metadata name: {PREFIX}{name!r}")
    for header in KEPT:
        value = headers.get(header.lower())
        if header == "Content-Encoding" and value is not None:
            # aws-chunked is how this request's body came, not the object's encoding
            value = ",".join(item for item in (part.strip() for part in value.split(","))
                             if item and item.lower() != "aws-chunked") or None
        if value is not None and value.strip():
            meta[KEPT_MARK + header] = as_sent(value.strip())
    return meta


def recorder(call: Call, meta: dict[str, str], acl: str | None = None,
             shape: Shape | None = None) -> Callable[[Intent], Awaitable[None]] | None:
    """The ledger's ``on_intent``: the metadata, the canned ACL (None: the bucket's
    applies) and a multipart object's shape recorded under the intent's blob, after its row
    exists and before its bytes are sent (None: nothing to record)."""
    if not meta and acl is None and shape is None:
        return None
    ledger = call.ledger

    async def record(intent: Intent) -> None:
        await record_meta(ledger, intent.blob_name, meta, acl, shape)

    return record


def _header_value(value: str) -> str:
    """A value as one header can carry it: Latin-1 as it is, anything else RFC 2047's
    encoded word (UTF-8, base64), as S3 answers non-ASCII metadata."""
    try:
        value.encode("latin-1")
        return value
    except UnicodeEncodeError:
        return "=?UTF-8?B?" + base64.b64encode(value.encode()).decode() + "?="


def response_headers(meta: dict[str, str]) -> dict[str, str]:
    """The user metadata (``x-amz-meta-*``) and the kept headers of an object's ``meta``."""
    return {name.removeprefix(KEPT_MARK) if name.startswith(KEPT_MARK) else PREFIX + name:
            _header_value(value) for name, value in meta.items()}
