"""Reading a file through the ledger (local disk, or any store that signs no URL): a signed
link from ``LedgerStorage.url``, one byte range (``Range``) and conditional GET
(``If-None-Match``, ``If-Modified-Since``), streamed."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core.files.storage import default_storage
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotModified,
    StreamingHttpResponse,
)
from django.utils.http import http_date, parse_http_date_safe
from django.views.decorators.http import require_safe

from blobledger._base.disposition import content_disposition
from blobledger.django.links import check
from blobledger.django.storage import LedgerStorage
from blobledger.errors import NotFound

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
#: the bytes of a file from ``start``, ``length`` of them
Reader = Callable[[int, int], Iterator[bytes]]


def _aware(value: datetime | str | None) -> datetime | None:
    """A stored time (naive UTC) as an aware one."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class _Found:
    blob: str
    size: int
    sha256: str | None
    content_type: str
    filename: str
    changed: datetime | None


@require_safe
def serve(request: HttpRequest, name: str,
          storage: LedgerStorage | None = None) -> HttpResponseBase:
    store = storage or default_storage
    if not isinstance(store, LedgerStorage):
        raise Http404("not a ledger storage")
    found, chunks = _find(store, name)
    if not check(name, found.blob, request.GET.get("s", ""), store.url_lifetime()):
        raise Http404("no such file")  # as for a missing file: a forged or older link
    etag = f'"{found.sha256}"' if found.sha256 else None
    since = parse_http_date_safe(request.headers.get("If-Modified-Since", ""))
    match = request.headers.get("If-None-Match")
    if (match is not None and etag is not None and etag in match.split(", ")) or (
            match is None and since is not None and found.changed is not None
            and int(found.changed.timestamp()) <= since):
        response: HttpResponseBase = HttpResponseNotModified()
        _headers(response, found, etag)
        return response
    start, length, status = 0, found.size, 200
    wanted = request.headers.get("Range")
    if wanted is not None and _if_range(request, etag):
        parsed = _range(wanted, found.size)
        if parsed is None:
            response = HttpResponse(status=416)
            response["Content-Range"] = f"bytes */{found.size}"
            return response
        start, length, status = parsed[0], parsed[1], 206
    response = StreamingHttpResponse(chunks(start, length), status=status,
                                     content_type=found.content_type)
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{start + length - 1}/{found.size}"
    _headers(response, found, etag)
    return response


def _headers(response: HttpResponseBase, found: _Found, etag: str | None) -> None:
    if etag is not None:
        response["ETag"] = etag
    if found.changed is not None:
        response["Last-Modified"] = http_date(found.changed.timestamp())
    if found.filename:  # attachment: a file view never renders what it serves
        response["Content-Disposition"] = content_disposition(found.filename)
    response["Cache-Control"] = "private, max-age=0"
    response["X-Content-Type-Options"] = "nosniff"


def _if_range(request: HttpRequest, etag: str | None) -> bool:
    wanted = request.headers.get("If-Range")
    return wanted is None or (etag is not None and wanted == etag)


def _range(header: str, size: int) -> tuple[int, int] | None:
    """(start, length) of a single satisfiable byte range, else None."""
    matched = _RANGE.match(header.strip())
    if matched is None or size == 0:
        return None
    first, last = matched.groups()
    if not first:
        if not last or int(last) == 0:
            return None
        length = min(int(last), size)
        return size - length, length
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return None
    return start, end - start + 1


def _find(storage: LedgerStorage, name: str) -> tuple[_Found, Reader]:
    ledger = storage.ledger()
    try:
        attachment = ledger.attachment(name)
    except NotFound:
        doc = storage._document(name)
        if doc is None:
            raise Http404("no such file") from None

        def document(start: int, length: int) -> Iterator[bytes]:
            # the blob found (and signed for), never a version written since
            reader = ledger.run(ledger.ledger.store.open(doc.blob, start, length))
            return ledger.stream(reader.chunks)

        return _Found(doc.blob, doc.size or 0, doc.sha256, doc.content_type,
                      name.rsplit("/", 1)[-1], _aware(doc.updated_at)), document
    row = ledger.run(ledger.ledger.transitions.attachment(name))
    changed = _aware(row.changed_at) if row is not None else None

    def attached(start: int, length: int) -> Iterator[bytes]:
        return ledger.read_attachment(name, start, length)

    return _Found(name, attachment.size, attachment.sha256, attachment.content_type,
                  attachment.filename or name.rsplit("/", 1)[-1], changed), attached
