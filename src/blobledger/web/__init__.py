"""The operator's web page, served at ``/``: static files shipped in the package.

Plain HTML, one CSS file and one JavaScript module (no build step), plus tus-js-client
(vendored, pinned, with its licence) for resumable uploads. Every answer carries a Content
Security Policy that allows scripts, styles and connections from this origin only: no inline
script or style, so nothing a stored name or content type holds can run.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from starlette.responses import FileResponse, Response

STATIC = Path(__file__).parent / "static"

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def page_headers(content_security_policy: str) -> dict[str, str]:
    """The headers of a page the service serves itself (and of its files): its policy, no
    sniffing, no referrer, never framed, revalidated on every use."""
    return {"Content-Security-Policy": content_security_policy,
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}


HEADERS = page_headers(CONTENT_SECURITY_POLICY)
MEDIA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
               ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}

router = APIRouter(include_in_schema=False)


def _file(relative: str) -> Response:
    if "\x00" in relative:  # no file has one, and a path holding one cannot be resolved
        raise HTTPException(404, "no such file")
    path = (STATIC / relative).resolve()
    if STATIC.resolve() not in path.parents or not path.is_file() \
            or path.suffix not in MEDIA_TYPES:
        raise HTTPException(404, "no such file")
    return FileResponse(path, media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)


@router.get("/")
async def index() -> Response:
    """The page."""
    return _file("index.html")


@router.get("/static/{relative:path}")
async def static(relative: str) -> Response:
    """The page's scripts, styles and the vendored tus client."""
    return _file(relative)
