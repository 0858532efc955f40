"""A ledger on SQLite and on PostgreSQL (the local disk as its store: delivery never touches
the store), configured to deliver to a receiver that verifies every signature."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol import events
from blobledger.protocol.events import Event
from blobledger.stores.local import LocalStore
from tests.conftest import database_url
from tests.events.receiver import Receiver, receiving

#: small limits: three attempts, a one-second backoff, a ten-second lease
EVENT_SETTINGS = {"event_max_attempts": 3, "event_backoff": 1.0, "event_lease": 10.0,
                  "event_timeout": 5.0}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


@pytest.fixture(params=["sqlite", "postgresql"])
async def evledger(request: pytest.FixtureRequest, tmp_path: Path,
                   receiver: Receiver) -> AsyncIterator[Ledger]:
    pg = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    url = await database_url(request.param, tmp_path, pg)
    store = LocalStore(tmp_path / "store")
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0, webhook_urls=(receiver.url,),
                        webhook_secret=receiver.secret, **EVENT_SETTINGS)
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger


async def all_events(ledger: Ledger) -> list[Event]:
    async with ledger.db.transaction(readonly=True) as conn:
        return await events.listing(conn, limit=10000)


async def event_rows(ledger: Ledger) -> list[tuple[str, str]]:
    """(type, subject) of every event, in order."""
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(select(events.events.c.type, events.events.c.subject)
                                   .order_by(events.events.c.id))).all()
    return [(row.type, row.subject) for row in rows]
