"""Hostile webhook receivers on loopback sockets: each connection's request is read whole
(headers and a Content-Length body), then answered by the test's ``answer`` function with
the raw socket, so that a receiver can send anything at any pace. ``rss_kib`` reads a
process's memory from /proc (its resident set now, and its peak)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RawReceiver:
    """Every request it was sent (its arrival on the monotonic clock, its raw bytes), and
    when each of its connections ended (the peer gone: a send failed, or EOF)."""

    answer: Callable[[socket.socket], None]
    port: int = 0
    requests: list[tuple[float, bytes]] = field(default_factory=list)
    ended: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def serve(self, conn: socket.socket) -> None:
        with conn:
            data = bytearray()
            while b"\r\n\r\n" not in data:
                if not (chunk := conn.recv(65536)):
                    return
                data += chunk
            head, _, body = bytes(data).partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                if not (chunk := conn.recv(65536)):
                    return
                body += chunk
            with self.lock:
                self.requests.append((time.monotonic(), head + b"\r\n\r\n" + body))
            with contextlib.suppress(OSError):
                self.answer(conn)
            with self.lock:
                self.ended.append(time.monotonic())


@contextlib.contextmanager
def receiving(answer: Callable[[socket.socket], None]) -> Iterator[RawReceiver]:
    receiver = RawReceiver(answer)
    listener = socket.create_server(("127.0.0.1", 0))
    receiver.port = listener.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=receiver.serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone does not)
        listener.close()
        thread.join(5)


def gzip_of_zeros(size: int) -> bytes:
    """A gzip stream of ``size`` zero bytes (about a thousandth of that on the wire)."""
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = bytes(1024 * 1024)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join(parts) + packer.flush()


def rss_kib(pid: int) -> tuple[int, int]:
    """The process's resident set now and its peak (VmRSS, VmHWM), in KiB."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
