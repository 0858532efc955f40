"""``blobledger serve``: the HTTP service on uvicorn, over ``Ledger.from_env()``.

The configuration is read and checked, the database migrated and the store prepared before
the port opens; a problem with any of them is one line and a non-zero exit. Without
``BLOBLEDGER_API_TOKENS`` the service binds only to a loopback address unless
``--allow-unauthenticated`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
from collections.abc import Iterator

import uvicorn

from blobledger.api.app import BODY_TIMEOUT, Worker, create_app
from blobledger.cli import fail
from blobledger.config import Settings, from_env
from blobledger.ledger import Ledger

#: what the HTTP parser accepts in the request line and headers (the app answers 431 below)
MAX_HEAD_BYTES = 64 * 1024


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve", help="run the HTTP service",
        description="Run the HTTP service (migrates the database first). Configured by the "
        "BLOBLEDGER_* environment variables; with none, SQLite and local disk under ./var/.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (8000)")
    parser.add_argument("--body-timeout", type=float, default=BODY_TIMEOUT, metavar="SECONDS",
                        help="refuse an upload that sends no byte for this long (60)")
    parser.add_argument("--allow-unauthenticated", action="store_true",
                        help="bind a non-loopback address without BLOBLEDGER_API_TOKENS")
    parser.set_defaults(handler=run)


def background_workers(settings: Settings) -> list[Worker]:
    """Coroutine functions run beside the service for its lifetime (none yet)."""
    return []


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Server(uvicorn.Server):
    """uvicorn, stopping gracefully on SIGINT/SIGTERM and then returning normally."""

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


async def run(args: argparse.Namespace) -> int:
    settings = from_env()
    if not settings.api_tokens and not is_loopback(args.host) and not args.allow_unauthenticated:
        return fail(f"refusing to serve on {args.host} without BLOBLEDGER_API_TOKENS "
                    "(set tokens, bind 127.0.0.1, or pass --allow-unauthenticated)", 2)
    level = logging.getLogger().getEffectiveLevel()
    async with Ledger.from_env() as ledger:
        app = create_app(ledger, settings, workers=background_workers(settings),
                         body_timeout=args.body_timeout)
        config = uvicorn.Config(
            app, host=args.host, port=args.port, lifespan="on",
            log_level=min(level, logging.INFO), access_log=level <= logging.INFO,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES, server_header=False,
        )
        server = _Server(config)
        print(f"blobledger: serving on http://{args.host}:{args.port} "
              f"(database {ledger.db.engine.url.render_as_string(hide_password=True)}, "
              f"store {ledger.store.url})", flush=True)
        await server.serve()
        if not server.started:
            return fail(f"could not listen on {args.host}:{args.port}")
    return 0
