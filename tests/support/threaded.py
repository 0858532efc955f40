"""A loopback asyncio server in a thread of its own, for the test proxies (the fault proxy,
the latency proxy): one lifecycle, so each proxy only says what it does with a connection."""

from __future__ import annotations

import asyncio
import contextlib
import socketserver
import threading
from collections.abc import Iterator
from typing import Self, TypeVar

S = TypeVar("S", bound=socketserver.BaseServer)


class ThreadedServer:
    """Subclasses define ``_client`` and a ``port`` (0: a free one, set once listening)."""

    port: int
    thread_name = "test server"
    #: the stream reader's limit: the longest request head a connection may send
    head_limit = 64 * 1024

    def _init_server(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    async def listen(self) -> None:
        """Listen on 127.0.0.1 (in the running loop); ``port`` is the one bound."""
        self._server = await asyncio.start_server(self._client, "127.0.0.1", self.port,
                                                  limit=self.head_limit)
        self.port = self._server.sockets[0].getsockname()[1]

    def start(self) -> Self:
        """Serve from a thread with its own event loop."""
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self.listen())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"the {self.thread_name} did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serving(server: S) -> Iterator[S]:
    """A standard-library HTTP server (``socketserver`` style) answering in a daemon thread
    until the block ends."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
