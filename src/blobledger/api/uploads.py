"""From an HTTP request to what the ledger takes: a name, a content type and a byte stream.

A body is either ``multipart/form-data`` (a ``file`` field and a ``name`` field, in either
order) or raw bytes with ``?name=`` and its own Content-Type. A ``name`` field that follows
the file is handed to the ledger as a name known after the upload (``name_after_upload``).
Bytes are handed to the ledger as they arrive. The size limit is checked from Content-Length
before any byte is read, and again while streaming; a body that ends short of its
Content-Length, or a client that disconnects, fails the stream, so the ledger's failure path
runs and nothing becomes visible.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.requests import Request

from blobledger._base.names import check_document_name
from blobledger.api.multipart import FormReader, boundary_of
from blobledger.api.problems import Problem
from blobledger.errors import InvalidName, UploadAborted, UploadTooLarge
from blobledger.protocol.documents import limit_size

#: room allowed for the form's own bytes (boundaries, headers, text fields) over the limit
MULTIPART_OVERHEAD = 1024 * 1024


@dataclass
class Upload:
    name: str | None
    content_type: str | None
    data: AsyncIterator[bytes]
    #: for a form whose 'name' field follows the file: that name, once the file has streamed
    late_name: Callable[[], Awaitable[str]] | None = None


def query_param(request: Request, key: str) -> str | None:
    """A query parameter decoded strictly: invalid percent-encoded UTF-8 is a 400."""
    try:
        pairs = parse_qsl(request.scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise Problem(400, "invalid-input", "the query string is not valid UTF-8") from None
    for name, value in pairs:
        if name == key:
            return str(value)
    return None


def declared_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None:
        return None
    value = value.strip(" \t")
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise Problem(400, "invalid-input", "Content-Length must be a number of bytes")
    return int(value)


def check_declared_size(request: Request, limit: int) -> int | None:
    """413 before reading when Content-Length already says the body is too large."""
    length = declared_length(request)
    multipart = request.headers.get("content-type", "").lower().startswith("multipart/")
    allowed = limit + (MULTIPART_OVERHEAD if multipart else 0)
    if length is not None and length > allowed:
        raise Problem(413, "upload-too-large",
                      f"the body of {length} bytes exceeds the limit of {limit} bytes")
    return length


async def body_stream(
    request: Request, declared: int | None, limit: int, slack: int = 0
) -> AsyncIterator[bytes]:
    """The raw request body as it arrives, checked against its Content-Length and against
    ``limit`` (plus ``slack`` for a form's own bytes). A body that stalls for
    ``app.state.body_timeout`` seconds (e.g. one shorter than its Content-Length, from a
    client that keeps waiting) is a 408."""
    idle = float(request.app.state.body_timeout)
    received = 0
    while True:
        try:
            async with asyncio.timeout(idle):
                message = await request.receive()
        except TimeoutError:
            raise Problem(408, "body-timeout",
                          f"no body bytes for {idle:g}s after {received}"
                          + (f" of {declared} declared" if declared is not None else "")
                          + " bytes") from None
        if message["type"] == "http.disconnect":
            raise UploadAborted("the client disconnected during the upload")
        chunk = message.get("body", b"")
        if chunk:
            received += len(chunk)
            if received > limit + slack:
                raise UploadTooLarge(limit)
            yield chunk
        if not message.get("more_body", False):
            break
    if declared is not None and received < declared:
        raise Problem(400, "incomplete-body",
                      f"the body ended after {received} of its {declared} declared bytes")


def check_filename(filename: str) -> str:
    try:
        return check_document_name(filename)
    except InvalidName as exc:
        raise Problem(400, "invalid-filename", f"invalid filename: {exc}") from None


async def read_upload(request: Request, limit: int, *, named: bool) -> Upload:
    """The document name (``named`` uploads only), content type and bytes of a request."""
    declared = check_declared_size(request, limit)
    content_type = request.headers.get("content-type")
    query_name = query_param(request, "name") if named else None
    boundary = boundary_of(content_type) if content_type else None
    if boundary is None:
        if named and query_name is None:
            raise Problem(400, "missing-name",
                          "the document needs a name: ?name=… or a multipart 'name' field")
        raw = body_stream(request, declared, limit)
        return Upload(query_name, content_type, limit_size(raw, limit))

    form = FormReader(body_stream(request, declared, limit, MULTIPART_OVERHEAD), boundary)
    part = await form.until_file()
    if part.filename:
        check_filename(part.filename)
    early = form.fields.get("name")
    if named and query_name is not None and early is not None and early != query_name:
        raise Problem(400, "invalid-input", "?name= and the form's 'name' field differ")
    name = query_name if query_name is not None else early
    deferred = named and name is None  # the 'name' field, if any, follows the file

    async def late_name() -> str:
        """The 'name' field that followed the file (read once the file has streamed)."""
        late = form.fields.get("name")
        if late is None:
            raise Problem(400, "missing-name", "the form has no 'name' field")
        return late

    # a second 'name' field is refused by the form parser (a field may appear only once)
    return Upload(name if named else None, part.content_type,
                  limit_size(form.file_data(), limit), late_name if deferred else None)
