"""A hostile HTTP server on a loopback socket, for the CLI: each request is answered by the
test's ``respond`` function and kept (method, path, headers, body), so that a test can say
what the CLI printed and also what it sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def problem_reply(status: int, body: object, content_type: str = "application/problem+json",
                  ) -> Reply:
    """An error answer: ``body`` as JSON (bytes as they are)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(status, data, {"Content-Type": content_type})


def json_reply(status: int, body: object) -> Reply:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(status, data, {"Content-Type": "application/json"})


class Hostile(ThreadingHTTPServer):
    """Answers every request with ``respond(request)``; ``requests`` keeps them in order."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.respond: Callable[[Request], Reply] = lambda request: Reply(500)
        self.requests: list[Request] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        """A CLI that hangs up (a closed keep-alive connection, a body it stopped reading)
        is not the server's failure, and its traceback would land in the captured stderr
        the tests read: only other errors are printed."""
        import sys
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]

    def seen(self) -> list[tuple[str, str]]:
        """(method, path) of every request so far."""
        with self.lock:
            return [(r.method, r.path) for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    server: Hostile
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or "0")
        body = self.rfile.read(length) if length else b""
        request = Request(self.command, self.path,
                          {k.lower(): v for k, v in self.headers.items()}, body)
        with self.server.lock:
            self.server.requests.append(request)
        reply = self.server.respond(request)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _handle

    def log_message(self, format: str, *args: object) -> None:
        pass


def running() -> Iterator[Hostile]:
    """A started :class:`Hostile` (for a fixture), shut down afterwards."""
    server = Hostile()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
