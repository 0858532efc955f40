"""What keeps a web page on another origin from using the service through its reader's
browser, the outermost layer of the app (before any route, any upload slot, any body):

- **framing**: a request whose body two parsers could frame differently is a 400
  (:mod:`blobledger.api.framing`), and its connection ends;
- **the Host allow-list**: a ``Host`` that is not one of ``BLOBLEDGER_ALLOWED_HOSTS`` (by
  default the loopback names ``localhost``, ``127.0.0.1``, ``[::1]``), nor the service's
  own (the host of ``BLOBLEDGER_PUBLIC_URL``, or the address the connection came in on),
  is a 400: a page whose name was rebound to this address (DNS rebinding) reads nothing;
- **cross-site writes**: a request other than GET, HEAD or OPTIONS that a browser marks as
  sent from another site (``Sec-Fetch-Site``, or when a browser sends none, an ``Origin``
  that is not the ``Host``) is a 403, unless its origin is one of
  ``BLOBLEDGER_CORS_ORIGINS``. A plain form, a ``no-cors`` fetch or a beacon from another
  origin changes nothing; clients that are not browsers send neither header and are not
  concerned;
- **no framing**: every HTML answer carries ``X-Frame-Options: DENY`` and a Content
  Security Policy with ``frame-ancestors 'none'``.

CORS itself (Starlette's middleware, exact origins only) is installed by the app only when
``BLOBLEDGER_CORS_ORIGINS`` names some.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobledger._base.hosts import (
    LOOPBACK_HOSTS,
    base_url,
    host_allowed,
    normal_host,
    parse_authority,
    same_authority,
)
from blobledger.api.framing import framing_error
from blobledger.api.problems import Problem, problem_response
from blobledger.config import Settings

log = logging.getLogger("blobledger.api")

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: ``Sec-Fetch-Site`` values of requests a page on another origin did not make
OWN_SITE = (b"same-origin", b"none")
FRAME_ANCESTORS = "frame-ancestors 'none'"
FALLBACK_BASE = "http://localhost"

#: what a page on one of ``BLOBLEDGER_CORS_ORIGINS`` may send and read
CORS_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
CORS_HEADERS = (
    "Authorization", "Content-Type", "If-Match", "If-None-Match", "If-Range", "Range",
    "Idempotency-Key", "Repr-Digest", "Content-MD5", "Tus-Resumable", "Upload-Length",
    "Upload-Metadata", "Upload-Offset", "Upload-Checksum", "Upload-Defer-Length",
    "Upload-Concat")
CORS_EXPOSED = (
    "ETag", "Location", "Retry-After", "Repr-Digest", "Content-Disposition", "Upload-Offset",
    "Upload-Length", "Upload-Expires", "Upload-Metadata", "Tus-Resumable", "Tus-Version",
    "Tus-Extension", "Tus-Max-Size", "Blobledger-Document", "Blobledger-Attachment")
CORS_MAX_AGE = 600


def install(app: Starlette, settings: Settings) -> None:
    """Wrap ``app`` (its other middleware already added) in CORS, when origins are
    configured, and in :class:`BrowserGuard`, outermost."""
    if settings.cors_origins:  # exact origins only: none is ever reflected
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=list(CORS_METHODS), allow_headers=list(CORS_HEADERS),
                           expose_headers=list(CORS_EXPOSED), max_age=CORS_MAX_AGE)
    app.add_middleware(BrowserGuard, settings=settings)


def own_base_url(scope: Scope, settings: Settings) -> str:
    """The base of the URLs the service hands out: ``BLOBLEDGER_PUBLIC_URL``, else the
    address the connection came in on (as the server reports it, never the ``Host``)."""
    if settings.public_url:
        return settings.public_url
    server = scope.get("server")
    scheme = str(scope.get("scheme") or "http")
    if server and isinstance(server[0], str) and normal_host(server[0]) is not None:
        port = server[1] if len(server) > 1 and isinstance(server[1], int) else None
        return base_url(scheme, normal_host(server[0]) or "", port)
    return FALLBACK_BASE  # no address (a Unix socket): only relative use makes sense


def _values(scope: Scope, name: bytes) -> list[bytes]:
    return [bytes(value) for key, value in scope.get("headers", []) if key.lower() == name]


def _header(scope: Scope, name: bytes) -> bytes | None:
    values = _values(scope, name)
    return values[0] if values else None


class BrowserGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.allowed = settings.allowed_hosts or LOOPBACK_HOSTS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = self.refusal(scope)
        if problem is not None:
            log.info("refused %s %s: %s", scope.get("method"), scope.get("path"),
                     problem.detail)
            await problem_response(problem, scope.get("path"))(scope, receive, send)
            return

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": no_framing(message.get("headers", []))}
            await send(message)

        await self.app(scope, receive, framed)

    def refusal(self, scope: Scope) -> Problem | None:
        """The problem a request is refused with before anything reads it, if any."""
        close = {"Connection": "close"}
        error = framing_error(scope.get("headers", []), str(scope.get("http_version", "1.1")))
        if error is not None:
            return Problem(400, "malformed-request", f"ambiguous framing: {error}",
                           headers=close)
        hosts = _values(scope, b"host")
        if len(hosts) > 1 or (hosts and not self.host_ok(scope, hosts[0])):
            return Problem(400, "host-not-allowed",
                           "this service does not answer to that Host (BLOBLEDGER_ALLOWED_HOSTS)",
                           headers=close)
        if self.cross_site(scope):
            return Problem(403, "cross-site-request",
                           "a page on another site may not change anything here "
                           "(BLOBLEDGER_CORS_ORIGINS lists the origins that may)",
                           headers=close)
        return None

    def host_ok(self, scope: Scope, value: bytes) -> bool:
        parsed = parse_authority(value.decode("latin-1"))
        if parsed is None:
            return False
        if host_allowed(parsed[0], self.allowed):
            return True
        own = parse_authority(own_base_url(scope, self.settings).partition("://")[2]
                              .partition("/")[0])
        return own is not None and own[0] == parsed[0]

    def cross_site(self, scope: Scope) -> bool:
        """Whether a browser says a page on another origin sent this state-changing
        request (that origin not being one of ``BLOBLEDGER_CORS_ORIGINS``)."""
        if scope["method"] in SAFE_METHODS:
            return False
        origin = _header(scope, b"origin")
        if origin is not None and origin.decode("latin-1") in self.settings.cors_origins:
            return False
        site = _header(scope, b"sec-fetch-site")
        if site is not None:
            return site.strip().lower() not in OWN_SITE
        if origin is None:
            return False  # not a browser, or one that sends neither: nothing to go on
        host = _header(scope, b"host")
        return host is None or not same_authority(origin.decode("latin-1"),
                                                  host.decode("latin-1"))


def no_framing(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An HTML answer's headers with ``X-Frame-Options: DENY`` and ``frame-ancestors
    'none'`` (added to its Content Security Policy, or as one); others unchanged."""
    kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
    if not kind.lower().startswith(b"text/html"):
        return headers
    result = [(k, v) for k, v in headers if k.lower() != b"x-frame-options"]
    result.append((b"x-frame-options", b"DENY"))
    policies = [i for i, (k, _) in enumerate(result) if k.lower() == b"content-security-policy"]
    if not policies:
        result.append((b"content-security-policy", FRAME_ANCESTORS.encode()))
    for index in policies:
        key, value = result[index]
        if b"frame-ancestors" not in value.lower():
            result[index] = (key, value.rstrip(b"; ") + b"; " + FRAME_ANCESTORS.encode())
    return result
