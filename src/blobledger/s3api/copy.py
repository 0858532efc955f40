"""CopyObject: a write of the destination key (a create, or a replace of its document; the
destination's ``If-None-Match``/``If-Match`` as on PutObject) whose bytes are read from the
source key's ready document, checked against the source's ``x-amz-copy-source-if-*``
conditions first. The bytes stream from the store through the service (no store-side copy:
the destination's blob is its own create-only put, under the ledger's steps), and the
SHA-256 recorded for the source is checked before the destination commits.

``x-amz-metadata-directive``: ``COPY`` (the default) takes the source's content type and user
metadata, ``REPLACE`` the request's."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote
from xml.sax.saxutils import escape

from starlette.responses import Response

from blobledger import failpoints
from blobledger.errors import NotFound
from blobledger.protocol.documents import Document
from blobledger.s3api import multipart
from blobledger.s3api.access import canned_acl
from blobledger.s3api.call import Call, ledger_bucket
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import current_etag, etag_of, http_since, readable
from blobledger.s3api.objects import DEFAULT_TYPE, UNSUPPORTED
from blobledger.s3api.rows import Part, meta_of, record_part
from blobledger.s3api.shapes import upload_algorithm
from blobledger.s3api.usermeta import from_headers
from blobledger.s3api.writes import tags, write
from blobledger.s3api.xmlbody import NAMESPACE, iso, xml_response

SOURCE = "x-amz-copy-source"
DIRECTIVES = ("COPY", "REPLACE")


async def _source(call: Call) -> Document:
    """The source's ready document from ``x-amz-copy-source`` (``bucket/key``, URL-encoded,
    with or without a leading ``/``), if the caller may read it (as GetObject, by its
    key's scopes or by the object's ACL: another key's private object is AccessDenied): a
    bucket the key does not reach is NoSuchBucket; a version other than
    ``versionId=null`` (the one version of an object here) NotImplemented."""
    text = call.request.headers[SOURCE].strip()
    path, _, query = text.partition("?")
    if query and query != "versionId=null":
        raise S3Error("NotImplemented", "copying a version (versionId) is not implemented")
    bucket, _, key = unquote(path.lstrip("/")).partition("/")
    if not key:
        raise S3Error("InvalidArgument", "x-amz-copy-source must name a bucket and a key")
    name = ledger_bucket(bucket, call.settings.s3api_bucket)
    if not name:
        raise S3Error("NoSuchBucket", "The specified bucket does not exist")
    found = await call.ledger.buckets.lookup(name)  # NoSuchBucket
    try:
        return await readable(call, key, call.access_to(found))
    except NotFound:
        raise S3Error("NoSuchKey", "The specified key does not exist.") from None


async def _check_source(call: Call, source: Document) -> None:
    """The ``x-amz-copy-source-if-*`` conditions, as S3 weighs them: a matching If-Match
    overrides a failing If-Unmodified-Since, a failing If-None-Match wins over a passing
    If-Modified-Since."""
    headers = call.request.headers
    tag = await current_etag(call, source)
    modified = source.updated_at.replace(microsecond=0)
    if_match = headers.get(f"{SOURCE}-if-match")
    if_none_match = headers.get(f"{SOURCE}-if-none-match")
    unmodified = http_since(headers.get(f"{SOURCE}-if-unmodified-since"))
    since = http_since(headers.get(f"{SOURCE}-if-modified-since"))
    if if_match is not None:
        if "*" not in tags(if_match) and tag not in tags(if_match):
            raise _failed("x-amz-copy-source-If-Match")
    elif unmodified is not None and modified > unmodified:
        raise _failed("x-amz-copy-source-If-Unmodified-Since")
    if if_none_match is not None:
        if "*" in tags(if_none_match) or tag in tags(if_none_match):
            raise _failed("x-amz-copy-source-If-None-Match")
    elif since is not None and modified <= since:
        raise _failed("x-amz-copy-source-If-Modified-Since")


def _failed(header: str) -> S3Error:
    return S3Error("PreconditionFailed", "At least one of the pre-conditions you specified "
                   f"did not hold ({header})", headers={"x-amz-condition": header})


async def copy_object(call: Call) -> Response:
    call.need("write")
    headers = call.request.headers
    for name in headers:
        if name.startswith(UNSUPPORTED) or name.startswith(f"{SOURCE}-server-side"):
            raise S3Error("NotImplemented", f"{name} is not implemented on CopyObject")
    directive = headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in DIRECTIVES:
        raise S3Error("InvalidArgument", "x-amz-metadata-directive must be COPY or REPLACE")
    if headers.get("x-amz-tagging-directive", "COPY").upper() != "COPY":
        raise S3Error("NotImplemented", "tagging is not implemented")
    acl = canned_acl(headers)  # the copy's own (S3 copies no ACL from the source)
    source = await _source(call)
    if (source.bucket, source.name) == (call.ledger_bucket, call.key) and directive == "COPY":
        raise S3Error("InvalidRequest", "This copy request is illegal because it is trying "
                      "to copy an object to itself without changing the object's metadata, "
                      "storage class, website redirect location or encryption attributes.")
    ledger = call.ledger
    await _check_source(call, source)
    if directive == "COPY":
        content_type = source.content_type
        meta = await meta_of(ledger, source.blob)
    else:
        content_type = headers.get("content-type") or DEFAULT_TYPE
        meta = from_headers(headers)
    opened, reader = await ledger.open(source.id)
    try:
        if opened.blob != source.blob:  # replaced meanwhile: not the version checked
            raise S3Error("OperationAborted", "the source was replaced while it was read: "
                          "retry")
        doc = await write(call, call.key, reader, content_type=content_type, meta=meta,
                          sha256=source.sha256, if_none_match=headers.get("if-none-match"),
                          if_match=headers.get("if-match"), acl=acl)
    finally:
        await reader.aclose()
    return xml_response(
        f'<CopyObjectResult xmlns="{NAMESPACE}"><LastModified>{iso(doc.updated_at)}'
        f"</LastModified><ETag>{escape(etag_of(doc))}</ETag></CopyObjectResult>", call)


def is_copy(call: Call) -> bool:
    return SOURCE in call.request.headers


def _copy_range(text: str | None, size: int) -> tuple[int, int]:
    """(start, length) of ``x-amz-copy-source-range`` (``bytes=first-last``, both given, as
    S3 requires); the whole source without one. Past the source's end: ``InvalidRange``."""
    if text is None:
        return 0, size
    found = re.fullmatch(r"bytes=(\d+)-(\d+)", text.strip())
    if found is None:
        raise S3Error("InvalidArgument", "The x-amz-copy-source-range value must be of the "
                      "form bytes=first-last where first and last are the zero-based offsets "
                      "of the first and last bytes to copy")
    first, last = int(found.group(1)), int(found.group(2))
    if first > last or last >= size:
        raise S3Error("InvalidRange", "The requested range is not satisfiable")
    return first, last - first + 1


async def upload_part_copy(call: Call) -> Response:
    """UploadPartCopy: a part of a multipart upload whose bytes are a range of a ready
    document (``x-amz-copy-source``, any bucket the key reaches; its
    ``x-amz-copy-source-if-*`` checked first), staged and recorded as UploadPart does."""
    call.need("write")
    number = multipart.part_number(call)
    for name in call.request.headers:
        if name.startswith(f"{SOURCE}-server-side"):
            raise S3Error("NotImplemented", f"{name} is not implemented on UploadPartCopy")
    upload = await multipart.open_upload(call)
    source = await _source(call)
    await _check_source(call, source)
    start, length = _copy_range(call.request.headers.get(f"{SOURCE}-range"), source.size or 0)
    if length > multipart.MAX_PART:
        raise S3Error("EntityTooLarge", f"a part holds at most {multipart.MAX_PART} bytes here")
    ledger = call.ledger
    body = bytearray()
    if length:
        opened, reader = await ledger.open(source.id, start, length)
        try:
            if opened.blob != source.blob:  # replaced meanwhile: not the version checked
                raise S3Error("OperationAborted", "the source was replaced while it was "
                              "read: retry")
            async for chunk in reader:
                body += chunk
        finally:
            await reader.aclose()
    if len(body) != length:
        raise S3Error("OperationAborted", "the source changed while it was read: retry")
    md5 = hashlib.md5(body, usedforsecurity=False).hexdigest()
    algorithm = upload_algorithm(upload.meta)
    checksum = None if algorithm is None else algorithm.digest(bytes(body))
    part = await ledger.store.stage(upload.blob_name, upload.handle, number, bytes(body))
    await failpoints.hit("multipart.after_stage")
    await record_part(ledger, upload.id, Part(number, part, len(body), md5, ledger.clock(),
                                              checksum))
    answered = "" if algorithm is None or checksum is None else \
        f"<{algorithm.member}>{checksum}</{algorithm.member}>"
    return xml_response(
        f'<CopyPartResult xmlns="{NAMESPACE}"><LastModified>{iso(source.updated_at)}'
        f'</LastModified><ETag>"{md5}"</ETag>{answered}</CopyPartResult>', call)
