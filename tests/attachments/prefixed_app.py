"""Run by ``test_layout.py`` in a process of its own, under ``BLOBLEDGER_TABLE_PREFIX`` (and
``BLOBLEDGER_DB_SCHEMA``), which are read when blobledger is imported: the ledger migrates,
stages, an application session attaches, the sweeper and ``check`` run. Exit 0 when every
step did what it should."""

from __future__ import annotations

import asyncio
import sys

from sqlalchemy.ext.asyncio import async_sessionmaker

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.attachments.conftest import Invoice


async def main(database_url: str, store_url: str) -> None:
    settings = Settings(database_url=database_url, store_url=store_url, delete_grace=0)
    async with Ledger.from_urls(database_url, store_url, settings=settings) as ledger:
        async with ledger.db.engine.begin() as conn:
            await conn.run_sync(Invoice.metadata.create_all)
        keep, drop = await ledger.stage(b"kept"), await ledger.stage(b"dropped")
        sessions = async_sessionmaker(ledger.db.engine)
        async with sessions() as session, session.begin():
            session.add(Invoice(id=1, number="INV-1", pdf=keep))
        ledger.clock_offset = settings.sweep_after + 3600
        report = await Sweeper(ledger).run_once()
        assert report.fenced == 1 and report.deleted == 1, report
        found = await check(ledger, settled=True)
        assert found.ok and found.attached == 1 and drop.name != keep.name, found.render()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
