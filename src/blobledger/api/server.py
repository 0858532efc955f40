"""Running the app on uvicorn: HTTP parser limits, and a graceful stop on SIGINT/SIGTERM
after which ``serve`` returns normally (uvicorn's own handling re-raises the signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

#: what the HTTP parser buffers for a request line and headers (the app answers 431 below)
MAX_HEAD_BYTES = 64 * 1024


class GracefulServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready socket on host:port (OSError if the address is taken or invalid)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def serve(app: ASGIApp, sock: socket.socket) -> bool:
    """Serve on the bound socket until SIGINT/SIGTERM; False if the server did not start."""
    level = logging.getLogger().getEffectiveLevel()
    config = uvicorn.Config(
        app, lifespan="on", log_level=min(level, logging.INFO),
        access_log=level <= logging.INFO, h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        server_header=False,
    )
    server = GracefulServer(config)
    await server.serve(sockets=[sock])
    return bool(server.started)
