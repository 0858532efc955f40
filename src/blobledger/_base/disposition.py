"""The ``Content-Disposition`` of a document's bytes, wherever they are served from: the
service's own downloads and the signed read URLs a store hands out (Azure's ``rscd``, S3's
``response-content-disposition``) render it here, and only here.

A media type that cannot script is shown ``inline`` (:data:`INLINE_TYPES`, ``audio/*`` and
``video/*``); everything else is an ``attachment``, so a browser saves it rather than
rendering it. SVG is not a raster image (it can carry script) and is never inline. A
signed URL's answer also carries :func:`signed_cache_control`.
"""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

from werkzeug.http import quote_header_value

#: media types shown inline, besides ``audio/*`` and ``video/*``
INLINE_TYPES = frozenset({
    "image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp",
    "application/pdf", "text/plain"})
INLINE_FAMILIES = ("audio/", "video/")


def is_inline(content_type: str) -> bool:
    """Whether bytes of ``content_type`` (parameters ignored) may be shown inline."""
    essence = content_type.split(";", 1)[0].strip().lower()
    return essence in INLINE_TYPES or essence.startswith(INLINE_FAMILIES)


def content_disposition(document_name: str, content_type: str | None = None) -> str:
    """``inline`` (for :func:`is_inline` types) or ``attachment``, with an ASCII fallback
    filename and an RFC 5987 ``filename*``; ``attachment`` when no type is given.

    werkzeug quotes the fallback (``quote_header_value``, always quoted, as older clients
    expect); it has no RFC 6266 builder (``dump_options_header`` passes ``filename*``
    through as given), so the fallback's letters and the percent-encoding stay here.
    """
    kind = "inline" if content_type is not None and is_inline(content_type) else "attachment"
    base = document_name.rsplit("/", 1)[-1] or "download"
    fallback = "".join(
        c if 0x20 <= ord(c) < 0x7F and c not in '"\\%;' else "_"
        for c in unicodedata.normalize("NFKD", base)
        if not unicodedata.combining(c)
    ) or "download"
    encoded = quote(base, safe="!#$&+-.^_`|~")
    filename = quote_header_value(fallback, allow_token=False)
    return f"{kind}; filename={filename}; filename*=UTF-8''{encoded}"


def signed_cache_control(expires_in: float) -> str:
    """The ``Cache-Control`` a signed read URL's answer carries: the bytes under a blob
    name never change (``immutable``), but the answer is one reader's, kept no longer than
    the URL lives."""
    return f"private, max-age={int(expires_in)}, immutable"
