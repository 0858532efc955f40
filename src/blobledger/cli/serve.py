"""``blobledger serve``: the HTTP service on uvicorn, over ``Ledger.from_settings``.

The configuration is read and checked, the database migrated and the store prepared before
the port opens; a problem with any of them is one line and a non-zero exit. Without
``BLOBLEDGER_API_TOKENS`` the service binds only to a loopback address unless
``--allow-unauthenticated`` says otherwise. Connections are bounded by
``BLOBLEDGER_HEADER_TIMEOUT``, ``BLOBLEDGER_KEEP_ALIVE_TIMEOUT``, ``BLOBLEDGER_MAX_CONNECTIONS``
and ``BLOBLEDGER_MAX_UPLOADS`` (see ``blobledger.api.connections``); the descriptor limit is
raised to what the connection cap needs, or the start refused. Browsers are kept out by
``BLOBLEDGER_ALLOWED_HOSTS``, ``BLOBLEDGER_CORS_ORIGINS`` and ``BLOBLEDGER_PUBLIC_URL`` (see
``blobledger.api.browser``): on a non-loopback address without either of the first and the
last, only the loopback names and the address connected to are answered (said at start).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import os
import shutil
import socket
import sys
from pathlib import Path

import click

from blobledger._base import extras
from blobledger._base.logs import announce
from blobledger.cli import fail, run_async
from blobledger.cli import settings as current_settings
from blobledger.config import Settings
from blobledger.protocol.ledger import Ledger  # loaded by the package anyway
from blobledger.workers.supervisor import Worker


def background_workers(settings: Settings) -> list[Worker]:
    """Coroutine functions run beside the service for its lifetime: the sweeper, every
    ``BLOBLEDGER_SWEEP_INTERVAL`` (default 1m; ``0``: none), the event delivery worker
    while ``BLOBLEDGER_WEBHOOK_URLS`` is set (every ``BLOBLEDGER_EVENT_INTERVAL``), the
    processing of held documents, every ``BLOBLEDGER_PROCESSING_INTERVAL`` (when processors
    are configured), and with the deferred retag, the retag worker (every
    ``BLOBLEDGER_RETAG_INTERVAL``, and a second after a C4/R4 woke it). Each runs supervised
    (:mod:`blobledger.workers.supervisor`): restarted when it raises, judged by ``/readyz``."""
    from blobledger.workers.delivery import background_delivery
    from blobledger.workers.processing import background_processing
    from blobledger.workers.retagger import background_retagger
    from blobledger.workers.sweeper import background_sweeper

    workers = [background_sweeper(settings.sweep_interval), background_delivery(settings),
               background_processing(settings.processors, settings.processing_interval),
               background_retagger(settings.retag == "deferred", settings.retag_interval)]
    return [worker for worker in workers if worker is not None]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine uses: a wildcard address becomes loopback."""
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when it is under it, else absolute."""
    try:
        return os.path.join(".", path.relative_to(Path.cwd())).removeprefix("./")
    except ValueError:
        return str(path)


def cli_lines() -> list[str]:
    """How to run this installation's ``blobledger`` from another terminal: the bare name
    when it is on the PATH, else its path, and the virtualenv's activation line."""
    program = Path(sys.argv[0]).absolute()
    on_path = shutil.which("blobledger")
    if program.name != "blobledger" or (on_path and Path(on_path).absolute() == program):
        return ["blobledger ls"]
    activate = program.parent / "activate"  # a virtualenv's, beside its programs
    lines = [f"{shown_path(program)} ls"]
    if activate.is_file():
        lines.append(f"(or `. {shown_path(activate)}` once, then `blobledger ls`)")
    return lines


def banner(host: str, port: int, settings: Settings) -> tuple[str, dict[str, str]]:
    """What ``serve`` says once it listens: the URL, the web page, the API docs and the
    commands that point the CLI at this port."""
    url = client_url(host, port)
    commands = [f"export BLOBLEDGER_URL={url}"]
    if settings.api_tokens:
        commands.append("export BLOBLEDGER_TOKEN=<a token of BLOBLEDGER_API_TOKENS>")
    commands += cli_lines()
    here = " in this folder" if any(c.startswith(".") for c in commands) else ""
    text = "\n".join([f"blobledger: listening on {url}",
                       f"  web page:  {url}/",
                       f"  API docs:  {url}/docs",
                       f"  the CLI against this service, from another terminal{here}:",
                       *(f"    {line}" for line in commands)])
    return text, {"url": url, "web": f"{url}/", "docs": f"{url}/docs",
                  "cli": "\n".join(commands)}


async def announce_when_listening(sock: socket.socket, host: str, port: int,
                                  settings: Settings) -> None:
    """The banner, once the server has put the socket in the listening state (after the
    application's start-up)."""
    # the listening state is the kernel's: there is no event to wait on, only a flag to read
    while not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    text, fields = banner(host, port, settings)
    announce(text, "serve.ready", **fields)


EXAMPLES = """\b
Examples:
  blobledger serve
  BLOBLEDGER_API_TOKENS=t1:write blobledger serve --host 0.0.0.0 --port 8080
"""


@click.command(epilog=EXAMPLES)
@click.option("--host", default="127.0.0.1", show_default=True, help="address to bind")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="port to bind")
@click.option("--body-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="refuse an upload that sends no byte for this long "
              "(default: BLOBLEDGER_BODY_TIMEOUT, 60s)")
@click.option("--allow-unauthenticated", is_flag=True,
              help="bind a non-loopback address without BLOBLEDGER_API_TOKENS")
@run_async
async def command(host: str, port: int, body_timeout: float | None,
                  allow_unauthenticated: bool) -> int:
    """Run the HTTP service (migrates the database first). Configured by the settings
    (BLOBLEDGER_* variables, .env, --config); with none, SQLite and local disk under
    ./var/."""
    # the service comes with the serve extra: without it, one line naming it (ConfigError)
    extras.require(extras.SERVE_MODULES, "serve", "blobledger serve")
    settings = current_settings()
    if not settings.api_tokens and not is_loopback(host) and not allow_unauthenticated:
        return fail(f"refusing to serve on {host} without BLOBLEDGER_API_TOKENS "
                    "(set tokens, bind 127.0.0.1, or pass --allow-unauthenticated)", 2)
    # the service's modules load only when it is started (the other commands stay quick)
    from blobledger.api.app import create_app
    from blobledger.api.server import bind, ensure_descriptors, serve

    ensure_descriptors(settings.max_connections)  # ConfigError (one line, exit 2) if short

    try:
        sock = bind(host, port)
    except OSError as exc:
        hint = (" (another process listens there: stop it, or serve on another port with "
                "--port N, or --port 0 for any free one)" if exc.errno == errno.EADDRINUSE
                else "")
        return fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}")
    with sock:
        async with Ledger.from_settings(settings) as ledger:
            app = create_app(ledger, settings, workers=background_workers(settings),
                             body_timeout=body_timeout)
            if settings.s3api_keys:  # the S3-compatible endpoint (docs/s3.md)
                from blobledger.s3api import mount

                mount(app, settings)
            port = sock.getsockname()[1]
            database = ledger.db.engine.url.render_as_string(hide_password=True)
            announce(f"blobledger: serving on http://{host}:{port} (database {database}, "
                     f"store {ledger.store.url})", "serve.start",
                     url=f"http://{host}:{port}", database=database, store=ledger.store.url)
            if not is_loopback(host) and not settings.allowed_hosts \
                    and not settings.public_url:
                announce("blobledger: a Host other than localhost, 127.0.0.1, [::1] or the "
                         "address connected to gets a 400: set BLOBLEDGER_PUBLIC_URL or "
                         "BLOBLEDGER_ALLOWED_HOSTS to the names clients use", "serve.hosts")
            ready = asyncio.create_task(announce_when_listening(sock, host, port, settings))
            try:
                started = await serve(app, sock, settings)
            finally:
                ready.cancel()
            if not started:
                return fail(f"the server on {host}:{port} did not start")
    return 0
