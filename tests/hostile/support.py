"""Hostile clients need real servers and real sockets: ``blobledger serve`` subprocesses on
SQLite or PostgreSQL and a local folder, raw HTTP/1.1 over TCP, and in-process apps for the
cases that are about parsing rather than connections."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import free_port, terminate


@dataclass
class Served:
    url: str
    port: int
    folder: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def database(self) -> Path:
        return self.folder / "ledger.db"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(extra)
    return env


def limit_descriptors(count: int) -> Callable[[], None]:
    """A ``preexec_fn`` giving the child at most ``count`` descriptors (soft and hard)."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return apply


@contextlib.contextmanager
def serve(database_url: str | None = None, *, env: Mapping[str, str] | None = None,
          descriptors: int | None = None) -> Iterator[Served]:
    """``blobledger serve`` on a free loopback port: SQLite in a temporary folder unless
    ``database_url`` is given, and a local store in that folder."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="blobledger-hostile-") as name:
        folder = Path(name)
        settings = {
            "BLOBLEDGER_DATABASE_URL": database_url or f"sqlite:///{folder / 'ledger.db'}",
            "BLOBLEDGER_STORE_URL": f"file://{folder / 'store'}",
            **(env or {}),
        }
        log = folder / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                blobledger_command("--log-level", "INFO", "serve", "--port", str(port)),
                env=clean_env(**settings), cwd=folder, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=limit_descriptors(descriptors) if descriptors else None)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_ready(url, process, log)
            yield Served(url, port, folder, log, process)
        finally:
            terminate(process, 15)


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def problem(self) -> dict[str, object]:
        assert self.headers.get("content-type") == "application/problem+json", self
        return dict(json.loads(self.body))


def read_response(sock: socket.socket, buffer: bytearray | None = None) -> RawResponse:
    """One HTTP/1.1 response (Content-Length framed); leftover bytes stay in ``buffer``."""
    data = buffer if buffer is not None else bytearray()
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"connection closed before a response: {bytes(data)!r}")
        data += chunk
    end = data.index(b"\r\n\r\n")
    lines = bytes(data[:end]).decode("latin-1").split("\r\n")
    del data[:end + 4]
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(data) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed inside a response body")
        data += chunk
    body = bytes(data[:length])
    del data[:length]
    return RawResponse(int(lines[0].split()[1]), headers, body)


def is_closed(sock: socket.socket, wait: float) -> bool:
    """Whether the server has closed the connection (EOF or reset) within ``wait`` seconds;
    any response bytes before the end are read and dropped."""
    sock.settimeout(wait)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True
