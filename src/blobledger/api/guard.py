"""The outermost guard of the app: header-size limits, the route's token checked on the
request head (before any body byte is read), a cap on concurrent uploads (a slot taken only
by an admitted request), a minimum body rate, a problem document (never a traceback) for
any exception that escapes a route before its response has started, and the fate of a
refused request's unread body.

A request refused on its head (401, 403) never has its body read: the answer carries
``Connection: close`` whenever a body was announced.

A refused upload whose unread rest is small (a declared Content-Length of at most
:data:`DRAIN_LIMIT` bytes, no ``Expect: 100-continue``) keeps its connection: the server
reads and drops the rest, and the client reads the problem document. A larger or unknown
rest gets ``Connection: close`` (``blobledger serve`` then closes gracefully, reading and
dropping what still arrives for a moment, so that the response is not lost to a reset)."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobledger._base import metrics
from blobledger.api.auth import admit
from blobledger.api.bodyrate import MinimumRate
from blobledger.api.problems import Problem, error_response, problem_response

log = logging.getLogger("blobledger.api")

#: the largest single header value, and all headers together, the app accepts (431 beyond;
#: ``blobledger serve`` lets the HTTP parser accept 64 KiB so that these answer first)
MAX_HEADER_VALUE = 8 * 1024
MAX_HEADERS_TOTAL = 16 * 1024
#: the largest unread request body left for the server to drain instead of closing
DRAIN_LIMIT = 64 * 1024
RETRY_AFTER_BUSY = 1
#: a stalled body (408) or one past the size limit (413) always ends the connection
CLOSING_STATUSES = (408, 413)
UPLOAD_METHODS = ("POST", "PUT", "PATCH")
#: the largest JSON request body the app reads: every JSON body it takes is a small request
#: (``POST /uploads``), and FastAPI reads a JSON body whole before the route runs
MAX_JSON_BODY = 64 * 1024
#: where the Guard leaves the owner of what an admitted request creates (``request.state``)
OWNER_KEY = "blobledger_owner"


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


def _may_drain(scope: Scope, received: int) -> bool:
    """Whether the unread rest of the request body is small enough to be read and dropped
    by the server (instead of closing the connection)."""
    if _header(scope, b"expect") is not None:  # the client may never send the body
        return False
    length = _header(scope, b"content-length")
    if length is None:
        return _header(scope, b"transfer-encoding") is None  # no body at all
    text = length.strip()
    return text.isdigit() and len(text) <= 19 and int(text) - received <= DRAIN_LIMIT


def _is_json(scope: Scope) -> bool:
    value = _header(scope, b"content-type")
    media = (value or b"").split(b";", 1)[0].strip().lower()
    return media == b"application/json" or media.endswith(b"+json")


def _declared_length(scope: Scope) -> int:
    """The Content-Length the request declares (0 without one, or one that is not a number:
    the framing check refuses those)."""
    text = (_header(scope, b"content-length") or b"").strip()
    return int(text) if text.isdigit() and len(text) <= 19 else 0


def _has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    if length is not None:
        return length.strip() != b"0"
    return _header(scope, b"transfer-encoding") is not None


class Guard:
    """Before the app: headers too large (431); the route's token checked on the head
    (401/403, the body never read: :func:`blobledger.api.auth.admit`); an upload slot,
    taken only by an admitted request (503 beyond ``max_uploads``); a minimum body rate
    (408: :class:`blobledger.api.bodyrate.MinimumRate`); a JSON body over
    :data:`MAX_JSON_BODY` (413, from Content-Length before reading, or while it arrives).
    The admitted request's ``owner``
    goes to the app in ``scope["state"]``."""

    def __init__(self, app: ASGIApp, max_uploads: int | None = None,
                 min_body_rate: float = 0, body_rate_window: float = 10.0) -> None:
        self.app = app
        self.max_uploads = max_uploads
        self.min_body_rate = min_body_rate
        self.body_rate_window = body_rate_window
        self.uploads = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        started = False
        answered = False  # the Guard answered (a too slow body): the app's answer is dropped
        closing = False
        received = 0
        body_done = False
        paced = MinimumRate(receive, self.min_body_rate, self.body_rate_window)
        json_cap = MAX_JSON_BODY if _is_json(scope) else None

        async def counted() -> Message:
            nonlocal received, body_done
            message = await paced()
            if paced.too_slow:
                await too_slow()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                body_done = body_done or not message.get("more_body", False)
                if json_cap is not None and received > json_cap:
                    await refuse(json_too_large())
            return message

        async def watch(message: Message) -> None:
            nonlocal started
            if answered:
                return
            if message["type"] == "http.response.start":
                started = True
                status = message["status"]
                if status >= 500:
                    metrics.HTTP_ERRORS.labels(str(status)).inc()
                if closing or status in CLOSING_STATUSES or (
                        status >= 400 and not body_done and not _may_drain(scope, received)):
                    message = {**message, "headers": [*message.get("headers", []),
                                                      (b"connection", b"close")]}
            await send(message)

        async def refuse(problem: Problem) -> None:
            """Answer in the app's stead while it reads the body (its answer is dropped)."""
            nonlocal answered
            if started or answered:
                return
            await problem_response(problem, path)(scope, paced, watch)
            answered = True

        async def too_slow() -> None:
            log.info("refused a body slower than %g bytes/s: %s", paced.rate, path)
            await refuse(Problem(408, "body-too-slow",
                                 f"the body arrived slower than {paced.rate:g} bytes per "
                                 f"second over {paced.window:g}s"))

        def json_too_large() -> Problem:
            return Problem(413, "body-too-large",
                           f"a JSON request body may hold at most {MAX_JSON_BODY} bytes")

        headers = scope.get("headers", [])
        total = sum(len(k) + len(v) + 4 for k, v in headers)
        if total > MAX_HEADERS_TOTAL or any(len(v) > MAX_HEADER_VALUE for _, v in headers):
            problem = Problem(431, "headers-too-large",
                              f"request headers exceed {MAX_HEADER_VALUE} bytes for one value "
                              f"or {MAX_HEADERS_TOTAL} bytes in all")
            await problem_response(problem, path)(scope, counted, watch)
            return

        admission = admit(scope.get("app"), scope)
        if admission.problem is not None:
            closing = _has_body(scope)  # its body is never read
            await problem_response(admission.problem, path)(scope, receive, watch)
            return
        scope.setdefault("state", {})[OWNER_KEY] = admission.owner
        if json_cap is not None and _declared_length(scope) > json_cap:
            await problem_response(json_too_large(), path)(scope, receive, watch)
            return

        upload = scope["method"] in UPLOAD_METHODS
        if upload and self.max_uploads is not None and self.uploads >= self.max_uploads:
            problem = Problem(503, "too-many-uploads",
                              f"{self.max_uploads} uploads are already running; retry later",
                              headers={"Retry-After": str(RETRY_AFTER_BUSY)})
            await problem_response(problem, path)(scope, counted, watch)
            return
        self.uploads += upload
        try:
            await self.app(scope, counted, watch)
        except Exception as exc:
            if answered:  # the app failed on the body the Guard refused
                return
            if started:
                log.warning("response to %s failed after it started: %s", path,
                            type(exc).__name__)
                raise
            await error_response(exc, path)(scope, counted, watch)
        finally:
            self.uploads -= upload
