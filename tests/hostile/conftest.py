"""In-process apps over SQLite and PostgreSQL (with a local store) for the hostile cases
that are about parsing and meaning rather than connections."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from tests.api.conftest import client_for
from tests.conftest import database_url, make_store


@pytest.fixture(params=["sqlite", "postgresql"])
async def hostile_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Ledger]:
    kind = str(request.param)
    pg = request.getfixturevalue("pg_url") if kind == "postgresql" else None
    url = await database_url(kind, tmp_path, pg)
    store = await make_store("local", tmp_path, None)
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0,
                        api_tokens={"rw": frozenset({"read", "write"}),
                                    "ro": frozenset({"read"})})
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger


@pytest.fixture
async def hostile(hostile_ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(hostile_ledger) as client:
        client.headers["Authorization"] = "Bearer rw"
        yield client
