"""Reading a file through the ledger (local disk, or any store that signs no URL): a signed
link from ``LedgerStorage.url``, one byte range (``Range``, read by the service's own parser:
:mod:`blobledger._base.ranges`) and conditional GET (Django's
``get_conditional_response``: ``If-None-Match``, ``If-Modified-Since``, ``If-Match``,
``If-Unmodified-Since``), streamed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core.files.storage import default_storage, storages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    StreamingHttpResponse,
)
from django.utils.cache import get_conditional_response
from django.utils.http import http_date
from django.views.decorators.http import require_safe

from blobledger._base.disposition import content_disposition
from blobledger._base.names import is_media_type
from blobledger._base.ranges import Unsatisfiable, parse_range
from blobledger.django.links import check
from blobledger.django.storage import LedgerStorage
from blobledger.errors import NotFound

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
    return _respond(request, found, chunks, "private, max-age=0")


@require_safe
def serve_public(request: HttpRequest, storage: str, name: str) -> HttpResponseBase:
    """A file of a ``public`` storage of ``STORAGES``, by name, unsigned: its current bytes
    (a cache may keep them ``max_age`` seconds; no other storage is served here)."""
    store = storages[storage] if storage in dict(storages.backends) else None
    if not isinstance(store, LedgerStorage) or not store.public:
        raise Http404("no such file")
    found, chunks = _find(store, name)
    return _respond(request, found, chunks, f"public, max-age={store.max_age}")


def _respond(request: HttpRequest, found: _Found, chunks: Reader,
             cache_control: str) -> HttpResponseBase:
    etag = f'"{found.sha256}"' if found.sha256 else None
    changed = int(found.changed.timestamp()) if found.changed is not None else None
    conditional = get_conditional_response(request, etag=etag, last_modified=changed)
    if conditional is not None:  # Django's reading of the conditional headers: 304, 412
        if conditional.status_code == 304:
            _headers(conditional, found, etag, cache_control)
        return conditional
    start, length, status = 0, found.size, 200
    wanted = request.headers.get("Range")
    if wanted is not None and _if_range(request, etag):
        try:
            parsed = parse_range(wanted, found.size)
        except Unsatisfiable:
            refused = HttpResponse(status=416)
            refused["Content-Range"] = f"bytes */{found.size}"
            return refused
        if parsed is not None:
            start, length, status = parsed.start, parsed.length, 206
    response = StreamingHttpResponse(chunks(start, length), status=status,
                                     content_type=found.content_type)
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{start + length - 1}/{found.size}"
    _headers(response, found, etag, cache_control)
    return response


def _headers(response: HttpResponseBase, found: _Found, etag: str | None,
             cache_control: str) -> None:
    if etag is not None:
        response["ETag"] = etag
    if found.changed is not None:
        response["Last-Modified"] = http_date(found.changed.timestamp())
    if found.filename:  # inline only for what cannot script, as the service decides
        kind = found.content_type if is_media_type(found.content_type or "") else None
        response["Content-Disposition"] = content_disposition(found.filename, kind)
    response["Cache-Control"] = cache_control
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"


def _if_range(request: HttpRequest, etag: str | None) -> bool:
    wanted = request.headers.get("If-Range")
    return wanted is None or (etag is not None and wanted == etag)


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
