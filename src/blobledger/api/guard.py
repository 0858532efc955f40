"""The outermost guard of the app: header-size limits, a problem document (never a
traceback) for any exception that escapes a route before its response has started, and
``Connection: close`` on a refused upload (its body may be unread)."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from blobledger.api.problems import Problem, error_response, problem_response

log = logging.getLogger("blobledger.api")

#: the largest single header value, and all headers together, the app accepts (431 beyond;
#: ``blobledger serve`` lets the HTTP parser accept 64 KiB so that these answer first)
MAX_HEADER_VALUE = 8 * 1024
MAX_HEADERS_TOTAL = 16 * 1024


class Guard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if message["status"] >= 400 and scope["method"] in ("POST", "PUT"):
                    # the body may be unread: close rather than read it to keep the connection
                    message = {**message, "headers": [*message.get("headers", []),
                                                      (b"connection", b"close")]}
            await send(message)

        headers = scope.get("headers", [])
        total = sum(len(k) + len(v) + 4 for k, v in headers)
        if total > MAX_HEADERS_TOTAL or any(len(v) > MAX_HEADER_VALUE for _, v in headers):
            problem = Problem(431, "headers-too-large",
                              f"request headers exceed {MAX_HEADER_VALUE} bytes for one value "
                              f"or {MAX_HEADERS_TOTAL} bytes in all")
            await problem_response(problem, path)(scope, receive, watch)
            return

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                log.warning("response to %s failed after it started: %s", path,
                            type(exc).__name__)
                raise
            await error_response(exc, path)(scope, receive, watch)
