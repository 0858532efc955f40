"""``blobledger serve``: the HTTP service on uvicorn, over ``Ledger.from_env()``.

The configuration is read and checked, the database migrated and the store prepared before
the port opens; a problem with any of them is one line and a non-zero exit. Without
``BLOBLEDGER_API_TOKENS`` the service binds only to a loopback address unless
``--allow-unauthenticated`` says otherwise. Connections are bounded by
``BLOBLEDGER_HEADER_TIMEOUT``, ``BLOBLEDGER_KEEP_ALIVE_TIMEOUT``, ``BLOBLEDGER_MAX_CONNECTIONS``
and ``BLOBLEDGER_MAX_UPLOADS`` (see ``blobledger.api.connections``); the descriptor limit is
raised to what the connection cap needs, or the start refused.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Awaitable, Callable

from blobledger.cli import fail
from blobledger.config import Settings, from_env
from blobledger.ledger import Ledger  # loaded by the package anyway


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve", help="run the HTTP service",
        description="Run the HTTP service (migrates the database first). Configured by the "
        "BLOBLEDGER_* environment variables; with none, SQLite and local disk under ./var/.")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (8000)")
    parser.add_argument("--body-timeout", type=float, default=None, metavar="SECONDS",
                        help="refuse an upload that sends no byte for this long "
                        "(default: BLOBLEDGER_BODY_TIMEOUT, 60s)")
    parser.add_argument("--allow-unauthenticated", action="store_true",
                        help="bind a non-loopback address without BLOBLEDGER_API_TOKENS")
    parser.set_defaults(handler=run)


def background_workers(settings: Settings) -> list[Callable[[Ledger], Awaitable[None]]]:
    """Coroutine functions run beside the service for its lifetime: the sweeper, every
    ``BLOBLEDGER_SWEEP_INTERVAL`` (unset: none; e.g. ``60s``)."""
    from blobledger.sweeper import background_sweeper

    sweeper = background_sweeper(settings.sweep_interval)
    return [sweeper] if sweeper is not None else []


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def run(args: argparse.Namespace) -> int:
    settings = from_env()
    if not settings.api_tokens and not is_loopback(args.host) and not args.allow_unauthenticated:
        return fail(f"refusing to serve on {args.host} without BLOBLEDGER_API_TOKENS "
                    "(set tokens, bind 127.0.0.1, or pass --allow-unauthenticated)", 2)
    # the service's modules load only when it is started (the other commands stay quick)
    from blobledger.api.app import create_app
    from blobledger.api.server import bind, ensure_descriptors, serve

    ensure_descriptors(settings.max_connections)  # ConfigError (one line, exit 2) if short

    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    with sock:
        async with Ledger.from_env() as ledger:
            app = create_app(ledger, settings, workers=background_workers(settings),
                             body_timeout=args.body_timeout)
            port = sock.getsockname()[1]
            print(f"blobledger: serving on http://{args.host}:{port} "
                  f"(database {ledger.db.engine.url.render_as_string(hide_password=True)}, "
                  f"store {ledger.store.url})", flush=True)
            if not await serve(app, sock, settings):
                return fail(f"the server on {args.host}:{port} did not start")
    return 0
