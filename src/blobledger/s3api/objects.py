"""The object operations, each on the ledger's steps: PutObject a create (``If-None-Match:
*``: a create only) or a replace of the key's document; GetObject and HeadObject a read of
a ready document (Range, the conditional headers); DeleteObject the ledger's delete.

A key is a document's name. The body streams into the ledger as it arrives, its
``x-amz-content-sha256``, ``Content-MD5`` and ``x-amz-checksum-{crc32,sha1,sha256}``
checked before the document is committed: a mismatch fails the ledger's upload, and
nothing becomes visible."""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncGenerator, AsyncIterator

from starlette.responses import Response, StreamingResponse

from blobledger.errors import NotFound, PreconditionFailed, UploadAborted
from blobledger.protocol.documents import Document
from blobledger.s3api.access import canned_acl
from blobledger.s3api.call import Call
from blobledger.s3api.checksums import CHECKSUMS
from blobledger.s3api.checksums import Checksum as _Checksum
from blobledger.s3api.chunked import decode, decoded_length, streaming
from blobledger.s3api.errors import S3Error
from blobledger.s3api.lookup import etag_of, find, http_date, http_since, readable
from blobledger.s3api.overrides import overrides
from blobledger.s3api.rows import Shape, kept_of
from blobledger.s3api.shapes import answered_checksum
from blobledger.s3api.sigv4 import is_sha256
from blobledger.s3api.usermeta import from_headers, response_headers
from blobledger.s3api.writes import write

#: request headers asking for what this endpoint does not keep or do yet
UNSUPPORTED = ("x-amz-tagging",
               "x-amz-object-lock-", "x-amz-server-side-encryption",
               "x-amz-website-redirect-location")
DEFAULT_TYPE = "application/octet-stream"
ATTEMPTS = 3


async def read_body(call: Call, limit: int) -> AsyncIterator[bytes]:
    """The request body as it arrives: at most ``limit`` bytes, its Content-Length met, a
    stall of the service's body timeout an error (the ledger's upload then fails)."""
    request = call.request
    idle = float(request.app.state.body_timeout)
    declared_text = request.headers.get("content-length")
    declared = int(declared_text) if declared_text and declared_text.isdigit() else None
    if declared is not None and declared > limit:
        raise S3Error("EntityTooLarge", f"the body of {declared} bytes exceeds the largest "
                      f"object, {limit} bytes")
    received = 0
    while True:
        try:
            async with asyncio.timeout(idle):
                message = await request.receive()
        except TimeoutError:
            raise S3Error("RequestTimeout", f"no body bytes for {idle:g}s") from None
        if message["type"] == "http.disconnect":
            raise UploadAborted("the client disconnected during the upload")
        chunk = message.get("body", b"")
        if chunk:
            received += len(chunk)
            if received > limit:
                raise S3Error("EntityTooLarge", f"the body exceeds {limit} bytes")
            yield chunk
        if not message.get("more_body", False):
            break
    if declared is not None and received < declared:
        raise S3Error("IncompleteBody", f"the body ended after {received} of its {declared} "
                      "declared bytes")


def _checksums(call: Call) -> list[_Checksum]:
    found = []
    for name, value in call.request.headers.items():
        if name.startswith("x-amz-checksum-"):
            algorithm = name.removeprefix("x-amz-checksum-")
            if algorithm == "type":
                continue
            if algorithm not in CHECKSUMS:
                raise S3Error("NotImplemented", f"x-amz-checksum-{algorithm} is not "
                              f"implemented (only {', '.join(CHECKSUMS)})")
            found.append(_Checksum(algorithm, value.strip()))
    return found


async def _checked(stream: AsyncIterator[bytes], checksums: list[_Checksum]
                   ) -> AsyncGenerator[bytes, None]:
    async for chunk in stream:
        for checksum in checksums:
            checksum.update(chunk)
        yield chunk
    for checksum in checksums:  # before the store's put completes: nothing is committed
        checksum.check()


def _md5(call: Call) -> str | None:
    text = call.request.headers.get("content-md5")
    if text is None:
        return None
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise S3Error("InvalidDigest", "the Content-MD5 you specified is not valid")
    return raw.hex()


async def put_object(call: Call) -> Response:
    """A create of the key's document, or a replace of it at the version found; with
    ``If-None-Match: *`` a create only (412 when the key exists, whoever wins a race), with
    ``If-Match`` a replace only at the version whose ETag matches (:mod:`.writes`)."""
    call.need("write")
    headers = call.request.headers
    for name in headers:
        if name.startswith(UNSUPPORTED):
            raise S3Error("NotImplemented", f"{name} is not implemented on PutObject")
    acl = canned_acl(headers)
    chunked = streaming(call)
    # a body of unknown length (HTTP's chunked transfer coding) streams in as another does,
    # up to the largest object
    sized = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "")
    if not sized and not chunked:
        raise S3Error("MissingContentLength", "you must provide the Content-Length header")
    payload = call.signed.payload
    limit = int(call.settings.max_upload_bytes)
    if chunked and decoded_length(call) > limit:
        raise S3Error("EntityTooLarge", f"the body exceeds the largest object, {limit} bytes")
    raw = read_body(call, limit + limit // 16 + 65536 if chunked else limit)
    data = _checked(decode(call, raw) if chunked else raw, _checksums(call))
    try:
        doc = await write(call, call.key, data, meta=from_headers(headers),
                          content_type=headers.get("content-type") or DEFAULT_TYPE,
                          sha256=payload if is_sha256(payload) else None,
                          md5=_md5(call), if_none_match=headers.get("if-none-match"),
                          if_match=headers.get("if-match"), acl=acl)
    finally:
        await data.aclose()
    return Response(status_code=200, headers=call.headers(ETag=etag_of(doc)))


def _etags(text: str) -> list[str]:
    return [item.strip().removeprefix("W/") for item in text.split(",") if item.strip()]


def _preconditions(call: Call, doc: Document, tag: str) -> int | None:
    """412 or 304 when a conditional header says so (S3's order: If-Match, then
    If-None-Match, the dates only where the tags are absent); None: answer."""
    headers = call.request.headers
    modified = doc.updated_at.replace(microsecond=0)
    if_match = headers.get("if-match")
    if if_match is not None:
        if "*" not in _etags(if_match) and tag not in _etags(if_match):
            return 412
    elif (since := http_since(headers.get("if-unmodified-since"))) and modified > since:
        return 412
    if_none_match = headers.get("if-none-match")
    if if_none_match is not None:
        if "*" in _etags(if_none_match) or tag in _etags(if_none_match):
            return 304
    elif (since := http_since(headers.get("if-modified-since"))) and modified <= since:
        return 304
    return None


def _range(text: str | None, size: int) -> tuple[int, int] | None:
    """(start, length) of one ``bytes=`` range; None for none (or for several, which S3
    answers with the whole object); InvalidRange past the end."""
    if text is None or not text.strip().startswith("bytes=") or "," in text:
        return None
    first, sep, last = text.strip().removeprefix("bytes=").partition("-")
    if not sep or not (first.isdigit() or last.isdigit()):
        return None
    if not first:
        length = min(int(last), size)
        if length == 0:
            raise S3Error("InvalidRange", "the requested range is not satisfiable",
                          headers={"Content-Range": f"bytes */{size}"})
        return size - length, length
    start = int(first)
    end = min(int(last), size - 1) if last.isdigit() else size - 1
    if start >= size or (last.isdigit() and int(last) < start):
        raise S3Error("InvalidRange", "the requested range is not satisfiable",
                      headers={"Content-Range": f"bytes */{size}"})
    return start, end - start + 1


def _part_number(call: Call, shape: Shape | None, size: int) -> tuple[int, int] | None:
    """GetObject's and HeadObject's ``partNumber``: the (start, length) of that part of a
    multipart object (``shape``); an object of one part is its part 1. A part past the
    object's is ``InvalidPart``, as S3 answers. None: no ``partNumber``."""
    text = call.params.get("partNumber")
    if text is None:
        return None
    if not text.isdigit() or not 1 <= int(text) <= 10000:
        raise S3Error("InvalidArgument", "Part number must be an integer between 1 and "
                      "10000, inclusive")
    number = int(text)
    sizes = [size] if shape is None else [part for part, _ in shape.parts]
    if number > len(sizes):
        raise S3Error("InvalidPart", "The requested partnumber is not satisfiable")
    return sum(sizes[:number - 1]), sizes[number - 1]


async def get_object(call: Call) -> Response:
    method = call.request.method
    doc = await readable(call, call.key)
    kept = await kept_of(call.ledger, doc.blob)  # its metadata and shape, in one read
    shape = kept.shape
    size = doc.size or 0
    part = _part_number(call, shape, size)
    tag = etag_of(doc, shape)
    headers = call.headers(ETag=tag, **{"Last-Modified": http_date(doc.updated_at),
                                        "Accept-Ranges": "bytes",
                                        "Content-Type": doc.content_type})
    headers.update(response_headers(kept.meta))
    headers.update(overrides(call))  # response-*: the request's own headers of the answer
    if part is not None and shape is not None:
        headers["x-amz-mp-parts-count"] = str(len(shape.parts))
    headers.update(answered_checksum(call, shape, part))
    status = _preconditions(call, doc, tag)
    if status == 412:
        raise S3Error("PreconditionFailed", "At least one of the pre-conditions you "
                      "specified did not hold")
    if status == 304:
        return Response(status_code=304, headers=headers)
    wanted = part if part is not None and shape is not None else \
        _range(call.request.headers.get("range"), size)
    start, length = wanted or (0, size)
    headers["Content-Length"] = str(length)
    if wanted is not None:
        headers["Content-Range"] = f"bytes {start}-{start + length - 1}/{size}"
    code = 206 if wanted is not None else 200
    if method == "HEAD":
        return Response(status_code=code, headers=headers)
    opened, reader = await call.ledger.open(doc.id, start, length)
    if opened.blob != doc.blob:  # replaced meanwhile: the headers would not be its own
        await reader.aclose()
        raise S3Error("OperationAborted", "the object was replaced while it was read: retry")

    async def body() -> AsyncIterator[bytes]:
        try:
            async for chunk in reader:
                yield chunk
        finally:
            await reader.aclose()

    return StreamingResponse(body(), status_code=code, headers=headers,
                             media_type=headers["Content-Type"])


async def delete_object(call: Call) -> Response:
    """The ledger's delete of the key's document at the version found (a delete of a key
    that names nothing is a success, as in S3)."""
    call.need("write")
    for _ in range(ATTEMPTS):
        try:
            doc = await find(call, call.key)
            await call.ledger.delete(doc.id, expected_version=doc.version)
        except NotFound:
            break
        except PreconditionFailed:  # replaced meanwhile: delete what it is now
            continue
        break
    else:
        raise S3Error("OperationAborted", "the object kept changing while it was deleted")
    return Response(status_code=204, headers=call.headers())
