"""Two sweepers racing over 800 stale intents on PostgreSQL + Azurite: each row once."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, insert, select

from blobledger import Ledger
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.db import Database
from blobledger.protocol.models import BlobRow, DocumentRow, DocumentStatus, utcnow
from blobledger.stores.azure import AzureStore
from blobledger.workers.sweeper import Sweeper
from tests.sweeper.support import one

ROWS = 800  # eight batches of 100: both sweepers take part
COMMITTED_EVERY = 10  # one in ten died after C3 and rolls forward


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql-azure"], indirect=True)
async def test_two_sweepers_handle_each_row_once(ledger: Ledger) -> None:
    then = utcnow() - timedelta(hours=3)
    names = [new_blob_name(ledger.settings.blob_prefix, "r.bin") for _ in range(ROWS)]
    docs = [new_document_id() for _ in range(ROWS)]
    async with ledger.db.session() as session:
        await session.execute(insert(DocumentRow), [
            {"id": doc, "name": f"race-{i}", "status": DocumentStatus.PENDING,
             "blob_name": name, "version": 1, "content_type": "application/octet-stream",
             "created_at": then, "updated_at": then}
            for i, (doc, name) in enumerate(zip(docs, names, strict=True))])
        await session.execute(insert(BlobRow), [
            {"name": name, "document_id": doc, "kind": "create", "state": "pending",
             "content_type": "application/octet-stream", "lease_until": then,
             "created_at": then, "changed_at": then}
            for doc, name in zip(docs, names, strict=True)])
    limit = asyncio.Semaphore(32)

    async def upload(i: int, name: str) -> None:
        tag = "committed" if i % COMMITTED_EVERY == 0 else "pending"
        async with limit:
            await ledger.store.put(name, one(b"%d" % i), tags={"state": tag})

    await asyncio.gather(*(upload(i, name) for i, name in enumerate(names)))

    assert isinstance(ledger.store, AzureStore)
    other_store = AzureStore(ledger.store.container_name,
                             connection_string=ledger.store._connection_string)
    async with Ledger(Database(ledger.db.url), other_store, ledger.settings,
                      migrate=False) as other:
        first, second = await asyncio.gather(Sweeper(ledger, batch=100).run_once(),
                                             Sweeper(other, batch=100).run_once())
    for report in (first, second):
        assert (report.errors, report.refused, report.absent) == (0, 0, 0), report
        assert report.claimed > 0, "both sweepers must have taken part"
    rolled = ROWS // COMMITTED_EVERY
    assert first.swept + second.swept == ROWS - rolled
    assert first.rolled_forward + second.rolled_forward == rolled
    assert first.claimed + second.claimed == ROWS
    async with ledger.db.session() as session:
        left = (await session.execute(select(BlobRow.state, func.count()).group_by(
            BlobRow.state))).all()
        ready = (await session.execute(select(func.count()).select_from(DocumentRow).where(
            DocumentRow.status == DocumentStatus.READY))).scalar_one()
    assert dict(left) == {"committed": rolled}
    assert ready == rolled
    assert len([b async for b in ledger.store.list()]) == rolled
