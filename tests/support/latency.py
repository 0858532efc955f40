"""A delaying HTTP/1.1 proxy: one added round trip of ``delay`` seconds per request/response
exchange, for benchmarks against a storage service on loopback (Azurite, moto's S3 server).

**What is delayed.** Every response, interim (``100 Continue``) or final, is held for
``delay`` seconds after its head arrives from the server and before its first byte goes to
the client; the body then streams through at full speed. So each exchange on a connection
costs one added round trip, as it would across a network with that round-trip time.
Requests and their bodies are forwarded at once and never buffered whole, so a 64 MiB
upload or download streams through in bounded memory. Not modelled: the round trip of a
new connection's handshake (the clients keep their connections), TCP's window (bandwidth
stays loopback's).

Each client connection gets its own upstream connection. ``exchanges`` counts the delayed
final responses and ``interim`` the delayed interim ones, so a test can check the delay
deterministically (one delay per exchange) instead of timing it.

Run in a thread of the caller (:meth:`LatencyProxy.start`, for tests) or as a process of its
own, so it competes for no interpreter lock with what it measures::

    python -m tests.support.latency --upstream-port 10000 --delay-ms 20   # prints its port
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
from dataclasses import dataclass

from tests.support.threaded import ThreadedServer

COPY = 256 * 1024
MAX_HEAD = 64 * 1024


@dataclass
class LatencyProxy(ThreadedServer):
    upstream_port: int
    #: seconds added to every request/response exchange (the response is held this long)
    delay: float
    port: int = 0
    upstream_host: str = "127.0.0.1"
    exchanges: int = 0
    interim: int = 0
    connections: int = 0
    thread_name = "latency proxy"
    head_limit = MAX_HEAD

    def __post_init__(self) -> None:
        self._init_server()

    # -- the proxy ------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                method, headers = _parse_head(head)
                if upstream is None:
                    upstream = await asyncio.open_connection(
                        self.upstream_host, self.upstream_port, limit=MAX_HEAD)
                up_reader, up_writer = upstream
                up_writer.write(head)
                # the body goes up while the answer is awaited (an early answer, a 100
                # Continue that the client waits for before it sends the body)
                sending = asyncio.create_task(_copy_body(reader, up_writer, headers, True))
                continued = False
                try:
                    while True:
                        response = await up_reader.readuntil(b"\r\n\r\n")
                        status = int(response.split(b" ", 2)[1])
                        await asyncio.sleep(self.delay)
                        if 100 <= status < 200:
                            self.interim += 1
                            continued = True
                            writer.write(response)
                            await writer.drain()
                            continue
                        self.exchanges += 1
                        writer.write(response)
                        _, response_headers = _parse_head(response)
                        if not (method == "HEAD" or status in (204, 304)):
                            await _copy_body(up_reader, writer, response_headers, False)
                        await writer.drain()
                        break
                    expects = "100-continue" in headers.get("expect", "").lower()
                    if expects and not continued and not sending.done():
                        return  # refused before its body was sent: the connection ends
                    await sending
                finally:
                    if not sending.done():
                        sending.cancel()
                        with contextlib.suppress(BaseException):
                            await sending
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ValueError, IndexError):
            return
        finally:
            if upstream is not None:
                upstream[1].transport.abort()
            with contextlib.suppress(Exception):
                writer.transport.abort()


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    return lines[0].split(" ", 1)[0], headers


async def _copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     headers: dict[str, str], request: bool) -> None:
    """Stream one message body as it is framed (length, chunked, or to the end of a
    response)."""
    if headers.get("transfer-encoding", "").lower().endswith("chunked"):
        while True:
            size_line = await reader.readuntil(b"\r\n")
            writer.write(size_line)
            size = int(size_line.split(b";", 1)[0], 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    line = await reader.readuntil(b"\r\n")
                    writer.write(line)
                    if line == b"\r\n":
                        break
                await writer.drain()
                return
            await _copy_exactly(reader, writer, size + 2)
    elif "content-length" in headers:
        await _copy_exactly(reader, writer, int(headers["content-length"]))
    elif not request:
        while chunk := await reader.read(COPY):
            writer.write(chunk)
            await writer.drain()
    await writer.drain()


async def _copy_exactly(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        length: int) -> None:
    left = length
    while left:
        chunk = await reader.read(min(left, COPY))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", left)
        writer.write(chunk)
        left -= len(chunk)
        await writer.drain()


@dataclass
class ProxyProcess:
    """A latency proxy in a process of its own (see ``main``)."""

    process: subprocess.Popen[bytes]
    port: int
    delay: float

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start_process(upstream_port: int, delay_ms: float) -> ProxyProcess:
    """``python -m tests.support.latency`` in front of ``upstream_port``; returns once it
    listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.latency", "--upstream-port", str(upstream_port),
         "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    if not line.isdigit():
        process.kill()
        raise RuntimeError(f"the latency proxy did not start: {line!r}")
    return ProxyProcess(process, int(line), delay_ms / 1000)


async def _main(upstream_port: int, delay_ms: float, port: int) -> None:
    proxy = LatencyProxy(upstream_port, delay_ms / 1000, port=port)
    await proxy.listen()
    print(proxy.port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.latency")
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_main(args.upstream_port, args.delay_ms, args.port))


if __name__ == "__main__":
    main()
