"""Connection-level limits for ``blobledger serve``: uvicorn's h11 protocol, bounded.

uvicorn closes a kept-alive connection that stays silent, but not one that never finishes
its request head, and it accepts connections until the process runs out of descriptors.
:class:`BoundedProtocol` adds what a server facing hostile or careless clients needs:

- **a header-read timeout**: from the moment a connection opens (or its last response
  ends) the next request head must be complete within ``header_timeout`` seconds; a client
  that sent part of one gets a 408 problem document, a silent one is simply closed;
- **a connection cap**: beyond ``max_connections`` open connections, the one that has been
  waiting longest for a request head is closed to make room; when every connection is busy
  with a request, the newcomer gets a 503 problem document with ``Retry-After``;
- **a lingering close**: a response that ends the connection is flushed, the sending side
  shut down, and whatever the client still sends is read and dropped for up to
  ``LINGER`` seconds before the socket is closed, so that unread request bytes never turn
  the close into a TCP reset that destroys the response in flight;
- **problem documents for the parser's own refusals** (a malformed request line or header,
  a bad Content-Length): ``application/problem+json`` like every other error;
- **strict framing**: a request head is checked as it was sent, before h11 merges repeated
  ``Content-Length`` headers, by :func:`blobledger.api.framing.framing_error`; an ambiguous
  one is refused like a malformed one (400, connection closed), so nothing its body holds is
  ever read as a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.h11_impl import H11Protocol

from blobledger.api.framing import framing_error

#: seconds a closing connection keeps reading (and dropping) what the client still sends
LINGER = 2.0
RETRY_AFTER_BUSY = 1
PROBLEM_TYPE = "urn:blobledger:problem:"


@dataclass(frozen=True)
class Limits:
    header_timeout: float = 10.0
    max_connections: int = 1000


def problem_bytes(status: int, reason: str, kind: str, detail: str,
                  extra_headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A complete HTTP/1.1 response carrying a problem document, ending the connection."""
    body = json.dumps({"type": PROBLEM_TYPE + kind, "title": reason, "status": status,
                       "detail": detail}).encode()
    head = [f"HTTP/1.1 {status} {reason}", "content-type: application/problem+json",
            f"content-length: {len(body)}", "connection: close",
            *(f"{name}: {value}" for name, value in extra_headers)]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def raw_headers(head: bytes) -> list[tuple[bytes, bytes]]:
    """The header fields of a request head as sent (request line and folded lines aside)."""
    fields = []
    for line in head.split(b"\n")[1:]:
        line = line.removesuffix(b"\r")
        if line and line[:1] not in (b" ", b"\t"):
            name, _, value = line.partition(b":")
            fields.append((name.strip(), value.strip(b" \t")))
    return fields


class StrictConnection(h11.Connection):
    """h11's server side, refusing a request whose framing is ambiguous (see
    :mod:`blobledger.api.framing`) from the head as received: h11 itself would merge a
    repeated ``Content-Length`` and frame by ``Transfer-Encoding`` when both are sent."""

    def next_event(self) -> Any:
        before = self.trailing_data[0] if self.their_state is h11.IDLE else None
        event = super().next_event()
        if before is not None and isinstance(event, h11.Request):
            head = before[:len(before) - len(self.trailing_data[0])]
            error = framing_error(raw_headers(head), event.http_version.decode("ascii"))
            if error is not None:
                raise h11.RemoteProtocolError(f"ambiguous framing: {error}", 400)
        return event


class LingeringTransport(asyncio.Transport):
    """The socket's transport, whose ``close()`` flushes, shuts the sending side down and
    drains the receiving side for a while before it really closes."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.inner = transport
        self._loop = loop
        self.lingering = False
        self._timer: asyncio.TimerHandle | None = None

    def close(self) -> None:
        if self.lingering or self.inner.is_closing():
            return
        self.lingering = True
        if not self.inner.can_write_eof():
            self.inner.close()
            return
        try:
            self.inner.write_eof()  # sent once the buffered response has been written
        except (OSError, RuntimeError):
            self.inner.close()
            return
        self.inner.resume_reading()
        self._timer = self._loop.call_later(LINGER, self.inner.close)

    def close_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.lingering = True
        self.inner.close()

    def is_closing(self) -> bool:
        return self.lingering or self.inner.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.lingering:
            self.inner.write(data)

    def writelines(self, list_of_data: Any) -> None:
        if not self.lingering:
            self.inner.writelines(list_of_data)

    def write_eof(self) -> None:
        self.inner.write_eof()

    def can_write_eof(self) -> bool:
        return self.inner.can_write_eof()

    def abort(self) -> None:
        self.close_now()
        self.inner.abort()

    def pause_reading(self) -> None:
        if not self.lingering:
            self.inner.pause_reading()

    def resume_reading(self) -> None:
        self.inner.resume_reading()

    def is_reading(self) -> bool:
        return self.inner.is_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.inner.get_extra_info(name, default)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.inner.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.inner.get_write_buffer_size()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.inner.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.inner.get_protocol()


class BoundedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the limits above (``limits`` is set by a subclass made
    with :func:`protocol_class`)."""

    limits: ClassVar[Limits] = Limits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = StrictConnection(h11.SERVER, self.config.h11_max_incomplete_event_size
                                     or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = LingeringTransport(transport, self.loop)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._waiting_since = self.loop.time()
        super().connection_made(self._lingering)
        if self._open_connections() > self.limits.max_connections and not self._make_room():
            self.logger.warning("connection limit (%d) reached: refused a connection",
                                self.limits.max_connections)
            self._lingering.inner.write(problem_bytes(
                503, "Service Unavailable", "too-many-connections",
                "the server has too many open connections; retry later",
                (("retry-after", str(RETRY_AFTER_BUSY)),)))
            self._lingering.close()
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._lingering.close_now()
        super().connection_lost(exc)

    def eof_received(self) -> None:
        if self._lingering.lingering:
            self._lingering.close_now()
        # returning nothing: asyncio closes the transport once the client has finished

    def data_received(self, data: bytes) -> None:
        if self._lingering.lingering:
            return  # the response is sent; what the client still sends is dropped
        if self.waiting_for_head():
            self._head_bytes += len(data)
        super().data_received(data)
        if not self.waiting_for_head():
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        self._head_bytes = 0
        self._waiting_since = self.loop.time()
        super().on_response_complete()
        if self.waiting_for_head() and not self.transport.is_closing():
            self._arm_head_timer()

    def timeout_keep_alive_handler(self) -> None:
        """An idle kept-alive connection: nothing is in flight, close at once."""
        if not self.transport.is_closing():
            self.evict()

    def shutdown(self) -> None:
        """The server stops: idle connections close at once, busy ones after their
        response (uvicorn's own behaviour)."""
        if self.waiting_for_head():
            self.evict()
        else:
            super().shutdown()

    def send_400_response(self, msg: str) -> None:
        """The parser refused the request (malformed head, bad Content-Length, a NUL in a
        header): a problem document, then the connection ends."""
        self.logger.info("refused a malformed request: %s", msg)
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self._lingering.inner.write(problem_bytes(
                400, "Bad Request", "malformed-request",
                "the request is not valid HTTP/1.1 (request line, headers or framing)"))
        self._lingering.close()

    # -- the header-read timeout ----------------------------------------------------------
    def waiting_for_head(self) -> bool:
        """No request is being served: the connection waits for (the rest of) a head."""
        return self.cycle is None or self.cycle.response_complete

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout,
                                                self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or not self.waiting_for_head():
            return
        partial = self._head_bytes > 0 and self.conn.our_state is h11.IDLE
        if partial:
            self._lingering.inner.write(problem_bytes(
                408, "Request Timeout", "header-timeout",
                f"the request head was not complete within {self.limits.header_timeout:g}s"))
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        if partial:
            self._lingering.close()
        else:
            self._lingering.close_now()

    # -- the connection cap ---------------------------------------------------------------
    def _open_connections(self) -> int:
        """Connections holding a socket that is not already on its way out."""
        return sum(1 for c in self.connections
                   if not (isinstance(c, BoundedProtocol) and c.closed()))

    def closed(self) -> bool:
        return self._lingering.inner.is_closing()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request head (lingering ones
        first); False if every other connection is serving a request."""
        idle = [c for c in self.connections
                if isinstance(c, BoundedProtocol) and c is not self and not c.closed()
                and c.waiting_for_head()]
        if not idle:
            return False
        victim = min(idle, key=lambda c: (not c._lingering.lingering, c._waiting_since))
        victim.evict()
        return True

    def evict(self) -> None:
        self._cancel_head_timer()
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self._lingering.close_now()


def protocol_class(limits: Limits) -> type[BoundedProtocol]:
    """The protocol class uvicorn is given (``uvicorn.Config(http=...)``)."""
    return type("BoundedH11Protocol", (BoundedProtocol,), {"limits": limits})
