"""A TCP proxy in front of PostgreSQL that cuts connections at chosen statements, for tests
of what a writer does when the database goes away mid-transaction.

It reads just enough of the frontend protocol to know which statement a client runs: the
startup packet (an SSL or GSS encryption request is refused here, so the session stays in
clear), then messages of one type byte and an int32 length. A simple ``Query`` ('Q') runs
its text; in the extended protocol ``Parse`` ('P') names a statement's text, ``Bind`` ('B')
puts a statement in a portal and ``Execute`` ('E') runs the portal: the statement counts
when it is executed (asyncpg parses each statement once per connection and binds it many
times). The server's messages are relayed untouched.

A test arms one cut (:meth:`PgProxy.arm`): the ``nth`` statement matching ``pattern`` (a
regular expression searched in its text, case-insensitive) after arming, optionally counted
only once a statement matching ``after`` was seen, is either

- ``before``: never forwarded: both sides are closed; the server rolls back the
  transaction, the statement never ran;
- ``after``: forwarded, and the server's whole answer (up to its ReadyForQuery) read and
  dropped, then both sides closed: the statement ran; for ``COMMIT`` the transaction is
  committed and the client never learns it.

With ``same_connection``, only the statements of the connection that ran ``after`` count
(the cut lands in the anchor's own transaction while other connections work alongside).
A cut fires once; afterwards new connections pass (the pool reconnects). ``statements``
logs every statement run through the proxy. Runs in its own thread and event loop
(:class:`ThreadedServer`), so sync and async tests can use it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
from dataclasses import dataclass, field
from typing import Literal

from tests.support.threaded import ThreadedServer

When = Literal["before", "after"]
#: the startup packet's codes that are requests rather than a protocol version
SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
#: how long an ``after`` cut waits for the server's answer before closing anyway
ANSWER_TIMEOUT = 10.0


@dataclass
class Cut:
    """One armed cut: the ``nth`` statement matching ``pattern`` (once ``after`` was seen)."""

    pattern: str
    when: When = "before"
    nth: int = 1
    after: str | None = None
    same_connection: bool = False
    seen: int = 0
    anchored: bool = False
    #: the connection that ran ``after`` (with ``same_connection``: the only one counted)
    anchor: int | None = None

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.pattern, re.IGNORECASE)
        self._after = re.compile(self.after, re.IGNORECASE) if self.after else None
        self.anchored = self._after is None

    def fires(self, sql: str, connection: int = 0) -> bool:
        """Whether running ``sql`` (on ``connection``) now is the cut (counting it if it
        matches)."""
        if not self.anchored:
            assert self._after is not None
            self.anchored = bool(self._after.search(sql))
            self.anchor = connection if self.anchored else None
            return False
        if self.same_connection and self.anchor is not None and connection != self.anchor:
            return False
        if self._pattern.search(sql):
            self.seen += 1
            return self.seen == self.nth
        return False


@dataclass
class PgProxy(ThreadedServer):
    thread_name = "pg proxy"

    upstream_port: int
    upstream_host: str = "127.0.0.1"
    port: int = 0
    statements: list[str] = field(default_factory=list)
    #: the cuts that fired, as (when, statement text)
    fired: list[tuple[When, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._cut: Cut | None = None
        self._then_down = self._down = False
        self._init_server()

    # -- control --------------------------------------------------------------------------
    def arm(self, pattern: str, when: When = "before", *, nth: int = 1,
            after: str | None = None, then_down: bool = False,
            same_connection: bool = False) -> None:
        """Cut at the ``nth`` statement matching ``pattern`` from now on (counted once a
        statement matching ``after`` ran, if given), ``before`` or ``after`` sending it;
        ``then_down``: after that cut, every statement is cut before it is sent, until
        :meth:`disarm` (a database that stays away); ``same_connection``: count only the
        statements of the connection that ran ``after``."""
        assert when in ("before", "after")
        with self._lock:
            self._cut = Cut(pattern, when, nth, after, same_connection)
            self._then_down = then_down
            self._down = False

    def disarm(self) -> None:
        """No more cuts: every statement passes (the database is back)."""
        with self._lock:
            self._cut = None
            self._down = False

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._cut is not None or self._down

    def url(self, database_url: str) -> str:
        """``database_url`` (a PostgreSQL URL) with its host and port this proxy's."""
        from sqlalchemy.engine import make_url

        parsed = make_url(database_url).set(host="127.0.0.1", port=self.port)
        return parsed.render_as_string(hide_password=False)

    def _decide(self, sql: str, connection: int = 0) -> When | None:
        with self._lock:
            self.statements.append(sql)
            if self._down:
                self.fired.append(("before", sql))
                return "before"
            cut = self._cut
            if cut is None or not cut.fires(sql, connection):
                return None
            self._cut = None
            self._down = self._then_down
            self.fired.append((cut.when, sql))
            return cut.when

    # -- the proxy ------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        try:
            startup = await _startup(reader, writer)
            if startup is None:
                return
            up_reader, upstream = await asyncio.open_connection(
                self.upstream_host, self.upstream_port)
            upstream.write(startup)
            await upstream.drain()
            answered = _Answer()
            pump = asyncio.create_task(_relay(up_reader, writer, answered))
            await self._forward(reader, upstream, answered)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if pump is not None:
                pump.cancel()
                with contextlib.suppress(BaseException):
                    await pump
            for side in (upstream, writer):
                if side is not None:
                    with contextlib.suppress(Exception):
                        side.transport.abort()

    async def _forward(self, reader: asyncio.StreamReader, upstream: asyncio.StreamWriter,
                       answered: _Answer) -> None:
        """Client to server, message by message, until the client leaves or a cut fires."""
        prepared: dict[bytes, str] = {}
        portals: dict[bytes, str] = {}
        while True:
            message = await _message(reader)
            if message is None:
                return
            kind, body = message[:1], message[5:]
            sql = _statement(kind, body, prepared, portals)
            when = self._decide(sql, id(reader)) if sql is not None else None
            if when == "before":
                return  # never forwarded; the finally closes both sides
            if when == "after":
                answered.swallow()
            upstream.write(message)
            await upstream.drain()
            if when == "after":
                await self._finish_after(reader, upstream, answered)
                return

    async def _finish_after(self, reader: asyncio.StreamReader,
                            upstream: asyncio.StreamWriter, answered: _Answer) -> None:
        """Keep forwarding the client's messages (an Execute's Sync) until the server has
        answered the cut statement in full, then return (both sides are closed)."""

        async def more() -> None:
            while (message := await _message(reader)) is not None:
                upstream.write(message)
                await upstream.drain()

        feeding = asyncio.create_task(more())
        try:
            async with asyncio.timeout(ANSWER_TIMEOUT):
                await answered.ready.wait()
        except TimeoutError:
            pass
        finally:
            feeding.cancel()
            with contextlib.suppress(BaseException):
                await feeding


class _Answer:
    """The server-to-client side's state: once ``swallow`` is called, nothing more is
    relayed, and ``ready`` is set when the server's next ReadyForQuery arrives."""

    def __init__(self) -> None:
        self.swallowing = False
        self.ready = asyncio.Event()

    def swallow(self) -> None:
        self.swallowing = True


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 answered: _Answer) -> None:
    """Server to client until the server leaves (then the client is let go too) or, once
    swallowing, until the server's ReadyForQuery."""
    try:
        while (message := await _message(reader)) is not None:
            if answered.swallowing:
                if message[:1] == b"Z":
                    answered.ready.set()
                    return
                continue
            writer.write(message)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.transport.abort()


async def _startup(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes | None:
    """The client's startup packet, after refusing any encryption request ('N')."""
    while True:
        try:
            head = await reader.readexactly(8)
        except asyncio.IncompleteReadError:
            return None
        length, code = struct.unpack("!ii", head)
        rest = await reader.readexactly(length - 8)
        if code in (SSL_REQUEST, GSS_REQUEST):
            writer.write(b"N")
            await writer.drain()
            continue
        return head + rest


async def _message(reader: asyncio.StreamReader) -> bytes | None:
    """One whole message (type byte, length, body), or None at the end of the stream."""
    try:
        head = await reader.readexactly(5)
    except asyncio.IncompleteReadError:
        return None
    (length,) = struct.unpack("!i", head[1:])
    return head + await reader.readexactly(length - 4)


def _cstrings(body: bytes, count: int) -> list[bytes]:
    return body.split(b"\0", count)[:count]


def _statement(kind: bytes, body: bytes, prepared: dict[bytes, str],
               portals: dict[bytes, str]) -> str | None:
    """The SQL text this message runs (a Query, an Execute), recording Parse and Bind."""
    if kind == b"Q":
        return body.rstrip(b"\0").decode("utf-8", "replace")
    if kind == b"P":
        name, query = _cstrings(body, 2)
        prepared[name] = query.decode("utf-8", "replace")
    elif kind == b"B":
        portal, name = _cstrings(body, 2)
        portals[portal] = prepared.get(name, "")
    elif kind == b"E":
        (portal,) = _cstrings(body, 1)
        return portals.get(portal, "")
    return None
