"""A fault-injecting HTTP/1.1 proxy for tests: it sits between a storage client and Azurite
(point the connection string's ``BlobEndpoint`` at it) and, per request, either forwards it
faithfully or injects one fault:

- ``status:<code>``: answer ``<code>`` (500, 503, ...) without forwarding
  (``status:<code>:<seconds>`` adds ``Retry-After: <seconds>``);
- ``reset_request``: read half of the request body, then drop the connection (not forwarded);
- ``reset_response``: forward, then send the head and half of the body, then drop;
- ``slow:<seconds>``: forward after a delay;
- ``hang``: never answer (the client's read timeout must fire);
- ``lost_response``: forward, let the server apply the request, then drop the connection
  before a byte of the answer is sent (a client retry finds its own write done).

Faults come from rules (:class:`Rule`: a predicate on the request, an action, how many
times) and, optionally, at random with a probability per request. Counts per action are
kept in ``injected``. It knows nothing of blobledger. Runs in its own thread with its own
event loop, so sync and async tests alike can use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from tests.support.threaded import ThreadedServer

MAX_HEAD = 64 * 1024


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.target).query)

    @property
    def comp(self) -> str | None:
        values = self.query.get("comp")
        return values[0] if values else None

    @property
    def is_tag_write(self) -> bool:
        """A Set Blob Tags."""
        return self.method == "PUT" and self.comp == "tags"

    @property
    def is_blob_write(self) -> bool:
        """A Put Blob or Put Block List (the create-only publications)."""
        return self.method == "PUT" and (
            self.comp == "blocklist" or (self.comp is None and self.header("x-ms-blob-type")
                                         is not None))

    def head_bytes(self) -> bytes:
        lines = [f"{self.method} {self.target} {self.version}"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass
class Rule:
    """Apply ``action`` to the next ``times`` requests that ``match`` accepts."""

    match: Callable[[Request], bool]
    action: str
    times: int = 1


@dataclass
class FaultProxy(ThreadedServer):
    thread_name = "fault proxy"

    upstream_port: int
    rules: list[Rule] = field(default_factory=list)
    #: random faults: each request gets one of these actions with probability ``rate``
    random_actions: Sequence[str] = ()
    rate: float = 0.0
    seed: int = 0
    port: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    requests: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._random = random.Random(self.seed)
        self._init_server()

    # -- rules ----------------------------------------------------------------------------
    def add(self, match: Callable[[Request], bool], action: str, times: int = 1) -> None:
        with self._lock:
            self.rules.append(Rule(match, action, times))

    def record(self, match: Callable[[Request], bool]) -> list[Request]:
        """Every request from now on that ``match`` accepts, in order (none is faulted)."""
        found: list[Request] = []

        def recorded(request: Request) -> bool:
            if match(request):
                found.append(request)
            return False

        self.add(recorded, "never", times=1 << 30)
        return found

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()
            self.rate = 0.0

    def _action_for(self, request: Request) -> str | None:
        with self._lock:
            self.requests += 1
            for rule in self.rules:
                if rule.times > 0 and rule.match(request):
                    rule.times -= 1
                    return rule.action
            if self.rate and self.random_actions and self._random.random() < self.rate:
                return self._random.choice(list(self.random_actions))
        return None

    def _count(self, action: str) -> None:
        with self._lock:
            self.injected[action.split(":", 1)[0]] += 1

    # -- the proxy ------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await _read_head(reader)
                if request is None:
                    return
                if (request.header("expect") or "").lower() == "100-continue":
                    # The proxy reads whole bodies before forwarding them: it answers the
                    # interim response itself (botocore waits for it before a body).
                    request.headers = [(k, v) for k, v in request.headers
                                       if k.lower() != "expect"]
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                action = self._action_for(request)
                if action is not None:
                    self._count(action)
                if action == "reset_request":
                    length = int(request.header("content-length") or 0)
                    await reader.readexactly(length // 2)
                    return  # half the body read, nothing forwarded: a dropped upload
                await _read_body(reader, request)
                if action == "hang":
                    await asyncio.Event().wait()  # until the client gives up
                if action is not None and action.startswith("status:"):
                    _, code, *after = action.split(":")
                    writer.write(_error_response(int(code), after[0] if after else None))
                    await writer.drain()
                    continue
                if action is not None and action.startswith("slow:"):
                    await asyncio.sleep(float(action.split(":", 1)[1]))
                if upstream is None:
                    upstream = await asyncio.open_connection("127.0.0.1", self.upstream_port)
                upstream[1].write(request.head_bytes() + request.body)
                await upstream[1].drain()
                head, body = await _read_response(upstream[0], request.method)
                if action == "lost_response":
                    return  # the server applied it; the client never hears
                if action == "reset_response" and body:
                    writer.write(head + body[: len(body) // 2])
                    await writer.drain()
                    return
                writer.write(head + body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        finally:
            if upstream is not None:
                upstream[1].close()
            with contextlib.suppress(Exception):
                writer.transport.abort()


async def _read_head(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ", 2)
    headers = [line.split(":", 1) for line in lines[1:] if line]
    return Request(method, target, version, [(k.strip(), v.strip()) for k, v in headers])


async def _read_body(reader: asyncio.StreamReader, request: Request) -> None:
    if (request.header("transfer-encoding") or "").lower() == "chunked":
        request.body = await _read_chunked(reader)
        request.headers = [(k, v) for k, v in request.headers
                           if k.lower() != "transfer-encoding"]
        request.headers.append(("Content-Length", str(len(request.body))))
    else:
        request.body = await reader.readexactly(int(request.header("content-length") or 0))


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip()
               for k, v in (line.split(":", 1) for line in lines[1:] if line)}
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return head, b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
        kept = [line for line in lines[1:] if line
                and not line.lower().startswith("transfer-encoding")]
        kept.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join([lines[0], *kept]) + "\r\n\r\n").encode("latin-1")
        return head, body
    return head, await reader.readexactly(int(headers.get("content-length", "0")))


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # no trailers are used here
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


def _error_response(status: int, retry_after: str | None = None) -> bytes:
    reason = {500: "Internal Server Error", 503: "Server Busy"}.get(status, "Error")
    code = {500: "InternalError", 503: "ServerBusy"}.get(status, "Error")
    body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
            f"<Message>injected by the fault proxy</Message></Error>").encode()
    extra = f"Retry-After: {retry_after}\r\n" if retry_after is not None else ""
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\n{extra}"
            f"x-ms-error-code: {code}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
