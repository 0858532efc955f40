"""Running the app on uvicorn: HTTP parser limits, connection limits (see
:mod:`blobledger.api.connections`), the descriptor budget, and a graceful stop on
SIGINT/SIGTERM after which ``serve`` returns normally (uvicorn's own handling re-raises the
signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import signal
import socket
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

from blobledger._base.logs import redact_access_log
from blobledger.api.connections import Limits, protocol_class
from blobledger.config import Settings
from blobledger.errors import ConfigError

#: what the HTTP parser buffers for a request line and headers (the app answers 431 below)
MAX_HEAD_BYTES = 64 * 1024
#: descriptors kept for everything that is not a client connection: the database pool,
#: SQLite's files, the store's client, logs, the event loop
RESERVED_DESCRIPTORS = 64


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


def backlog_for(max_connections: int) -> int:
    """Connections the kernel may queue: every one of them is accepted in one go."""
    return max(8, min(128, max_connections // 2))


def descriptors_needed(max_connections: int) -> int:
    """Two descriptors per connection (its socket, and the blob or database connection it
    may hold open), the accept backlog, and :data:`RESERVED_DESCRIPTORS`."""
    return 2 * max_connections + backlog_for(max_connections) + RESERVED_DESCRIPTORS


def ensure_descriptors(max_connections: int) -> int:
    """Raise the soft descriptor limit (``ulimit -n``) as far as ``max_connections`` needs,
    up to the hard limit; ConfigError if that is not enough. Returns the limit in force."""
    needed = descriptors_needed(max_connections)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise ConfigError(
            f"BLOBLEDGER_MAX_CONNECTIONS={max_connections} needs {needed} file descriptors "
            f"but the limit is {soft} (hard limit {hard}): raise `ulimit -n` or lower "
            "BLOBLEDGER_MAX_CONNECTIONS")
    return int(soft)


async def serve(app: ASGIApp, sock: socket.socket, settings: Settings | None = None) -> bool:
    """Serve on the bound socket until SIGINT/SIGTERM; False if the server did not start."""
    settings = settings or Settings()
    level = logging.getLogger().getEffectiveLevel()
    limits = Limits(header_timeout=settings.header_timeout,
                    max_connections=settings.max_connections)
    config = uvicorn.Config(
        app, lifespan="on", log_level=min(level, logging.INFO),
        access_log=level <= logging.INFO, h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        server_header=False, http=protocol_class(limits),
        timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type]
        backlog=backlog_for(settings.max_connections),
        # the root handler (blobledger.logs) writes uvicorn's lines as it writes ours, in
        # text or JSON; uvicorn's own handlers only when nothing configured logging
        log_config=None if logging.getLogger().handlers else uvicorn.config.LOGGING_CONFIG,
    )
    redact_access_log()  # after uvicorn configured its loggers: no token in an access line
    server = GracefulServer(config)
    await server.serve(sockets=[sock])
    return bool(server.started)
