"""The outermost guard of the app: header-size limits, and a problem document (never a
traceback) for any exception that escapes a route before its response has started."""

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
        headers = scope.get("headers", [])
        total = sum(len(k) + len(v) + 4 for k, v in headers)
        if total > MAX_HEADERS_TOTAL or any(len(v) > MAX_HEADER_VALUE for _, v in headers):
            problem = Problem(431, "headers-too-large",
                              f"request headers exceed {MAX_HEADER_VALUE} bytes for one value "
                              f"or {MAX_HEADERS_TOTAL} bytes in all")
            await problem_response(problem, path)(scope, receive, send)
            return

        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            if started:
                log.warning("response to %s failed after it started: %s", path,
                            type(exc).__name__)
                raise
            await error_response(exc, path)(scope, receive, send)
