"""The processes the event crash tests kill or pause, forked from a server that has already
imported blobledger (``multiprocessing`` ``forkserver``): a child costs a fork, not an
interpreter start, and still dies by a real SIGKILL with no cleanup of any kind. A ``stop``
failpoint stops it (SIGSTOP) until the test sends SIGCONT.

:func:`deliver` runs one delivery (the report, JSON, to ``args["report"]``); :func:`create`
creates one document (the writer killed before or after its commit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from blobledger import Ledger, failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores.local import LocalStore
from blobledger.workers.delivery import Delivery


def _ledger(args: dict[str, str]) -> Ledger:
    store = LocalStore(args["store"])
    hooks = {"webhook_urls": (args["url"],), "webhook_secret": args["secret"]} \
        if "url" in args else {}
    settings = Settings(database_url=args["database_url"], store_url=store.url,
                        upload_deadline=60, sweep_after=180, event_lease=10.0,
                        event_timeout=5.0, **hooks)
    failpoints.configure(args["failpoints"])
    return Ledger(Database(args["database_url"]), store, settings, migrate=False)


def deliver(args: dict[str, str]) -> None:
    async def run() -> None:
        async with _ledger(args) as ledger:
            report = await Delivery(ledger).run_once()
        Path(args["report"]).write_text(report.to_log())

    asyncio.run(run())


def create(args: dict[str, str]) -> None:
    async def run() -> None:
        async with _ledger(args) as ledger:
            await ledger.create("crash.txt", b"bytes")

    asyncio.run(run())
