"""Outages: a store or a database that does not answer is a 503 with Retry-After, never a 500.

The peers are real: an Azure endpoint and a PostgreSQL address on loopback ports where
nothing listens (connection refused), with the SDK's own retries turned off to stay fast.
"""

from __future__ import annotations

from pathlib import Path

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.migrate import migrate_database
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from tests.api.conftest import client_for, problem
from tests.support.services import connection_string, free_port


async def test_store_outage_is_503_with_retry_after(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    db = Database(url)
    await migrate_database(db)
    store = AzureStore("unreachable", connection_string=connection_string(free_port()),
                       client_options={"retry_total": 0})
    ledger = Ledger(db, store, Settings(database_url=url, store_url=store.url))
    try:
        async with client_for(ledger) as client:
            created = await client.post("/documents", params={"name": "n"}, content=b"bytes")
            problem(created, 503, "store-unavailable")
            assert created.headers["retry-after"].isdigit()
            ready = await client.get("/readyz")
            problem(ready, 503, "not-ready")
            assert "store" in ready.json()["detail"]
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.get("/documents")).json() == {"items": [],
                                                                "next_cursor": None}
    finally:
        await ledger.close()


async def test_database_outage_is_503_with_retry_after(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    store = LocalStore(tmp_path / "store")
    ledger = Ledger(Database(url), store, Settings(database_url=url, store_url=store.url))
    try:
        async with client_for(ledger) as client:
            created = await client.post("/documents", params={"name": "n"}, content=b"bytes")
            problem(created, 503, "database-unavailable")
            assert created.headers["retry-after"].isdigit()
            problem(await client.get("/documents"), 503, "database-unavailable")
            ready = await client.get("/readyz")
            problem(ready, 503, "not-ready")
            assert "database" in ready.json()["detail"]
        assert [p for p in (tmp_path / "store").rglob("*") if p.is_file()] == []  # no byte stored
    finally:
        await ledger.close()
