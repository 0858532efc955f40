"""Case C: the project's own protocol survives a crash between upload and "ready".

One document is created normally. A second create runs in a child process
(:mod:`blobledger.experiments.crash`) that is SIGKILLed by the ``create.after_upload``
failpoint: its rows stay ``pending`` and its blob (tagged ``pending``) stays in the
container. One run of the project's :class:`~blobledger.workers.sweeper.Sweeper`, with a clock past
``sweep_after``, then resolves it: conditional delete, then the rows.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from sqlalchemy import func, select

from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import StoreError
from blobledger.experiments.common import CaseResult, Context
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import DocumentRow, DocumentStatus
from blobledger.stores.azure import AzureStore
from blobledger.workers.sweeper import Sweeper

UPLOAD_DEADLINE = 60.0
SWEEP_AFTER = 180.0
CHILD_TIMEOUT = 60.0


async def _counts(ledger: Ledger, ctx: Context) -> dict[str, int]:
    async with ledger.db.session() as session:
        rows = int(await session.scalar(select(func.count()).select_from(DocumentRow)) or 0)
        pending = int(await session.scalar(
            select(func.count()).select_from(DocumentRow)
            .where(DocumentRow.status == DocumentStatus.PENDING)) or 0)
    return {"rows": rows, "pending": pending, "blobs": len(await ctx.blob_names())}


async def _crash_create(ctx: Context, settings: Settings) -> int:
    """Run a create in a child process that dies (SIGKILL) right after its upload."""
    # the child inherits this process's environment (PATH, the SDKs' own variables) with the
    # settings under test written over it; the child reads them through its settings object
    env = dict(os.environ)
    env.update({
        "BLOBLEDGER_FAILPOINTS": "create.after_upload=kill",
        "BLOBLEDGER_DATABASE_URL": settings.database_url,
        "BLOBLEDGER_STORE_URL": settings.store_url,
        "BLOBLEDGER_UPLOAD_DEADLINE": str(settings.upload_deadline),
        "BLOBLEDGER_SWEEP_AFTER": str(settings.sweep_after),
        "BLOBLEDGER_BLOB_PREFIX": settings.blob_prefix,
    })
    for key, value in (("BLOBLEDGER_AZURE_CONNECTION_STRING", settings.azure.connection_string),
                       ("BLOBLEDGER_AZURE_ACCOUNT_URL", settings.azure.account_url)):
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "blobledger.experiments.crash", "crashed.txt",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        _, err = await asyncio.wait_for(child.communicate(), CHILD_TIMEOUT)
    except TimeoutError:
        child.kill()
        await child.wait()
        raise StoreError("the crashing create did not finish within "
                         f"{CHILD_TIMEOUT:.0f}s") from None
    if child.returncode != -signal.SIGKILL:
        last = (err or b"").decode(errors="replace").strip().splitlines()
        raise StoreError(f"the crashing create exited with {child.returncode} instead of "
                         f"being killed: {last[-1] if last else 'no output'}")
    return -signal.SIGKILL


async def sweep(ledger: Ledger) -> tuple[int, str]:
    """One run of the project's sweeper; the number of stale intents it swept."""
    report = await Sweeper(ledger).run_once()
    return report.swept, "blobledger.sweeper.Sweeper"


async def case_c(ctx: Context, result: CaseResult) -> None:
    database_url = f"sqlite:///{ctx.workdir / 'c.db'}"
    settings = ctx.settings.with_(
        database_url=database_url, store_url=f"azure://{ctx.container.container_name}",
        upload_deadline=UPLOAD_DEADLINE, sweep_after=SWEEP_AFTER, delete_grace=0.0,
        blob_prefix="documents")
    store = AzureStore.from_settings(ctx.container.container_name, settings)
    async with Ledger(Database(database_url), store, settings) as ledger:
        await ledger.create("kept.txt", b"a document that made it", content_type="text/plain")
        await _crash_create(ctx, settings)
        before = await _counts(ledger, ctx)
    result.say(f"before sweep: rows={before['rows']} pending={before['pending']} "
               f"blobs={before['blobs']}")

    later = SWEEP_AFTER + UPLOAD_DEADLINE + 1  # the sweeper's clock: past every cutoff
    store = AzureStore.from_settings(ctx.container.container_name, settings)
    async with Ledger(Database(database_url), store, settings,
                      clock_offset=later) as ledger:
        swept, how = await sweep(ledger)
        after = await _counts(ledger, ctx)
    result.say(f"after sweep:  rows={after['rows']} blobs={after['blobs']} swept={swept}")
    result.say(f"swept by: {how}; the crashed child was killed by SIGKILL after its upload")
    result.figures.update(before=before, after={**after, "swept": swept}, sweeper=how)
