"""Held documents' fixtures: a ledger whose settings configure processors, on a real
database and store (SQLite and PostgreSQL on disk; one object store where it matters)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from tests.conftest import database_url, make_store

#: the database on disk both ways; the object stores are covered by the crash tests' rows
HELD_BACKENDS = ["sqlite-local", "postgresql-local"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"
#: a scanner command that rejects what holds the word EICAR (as ClamAV would the test file)
SCANNER = (f"{sys.executable} -c \"import sys; data = sys.stdin.buffer.read(); "
           "print('stream: Eicar-Test-Signature FOUND') if b'EICAR' in data else None; "
           "sys.exit(1 if b'EICAR' in data else 0)\"")

LedgerFactory = Callable[..., Any]


@pytest.fixture(params=HELD_BACKENDS)
def held_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_ledger(held_backend: str, tmp_path: Path,
                request: pytest.FixtureRequest) -> LedgerFactory:
    """``async with open_ledger(**settings) as ledger``: a ledger on one fresh database and
    store per test; each call opens another ledger on the same ones (another worker)."""
    db_kind, _ = held_backend.split("-")
    made: dict[str, Any] = {}

    @asynccontextmanager
    async def opened(clock_offset: float = 0.0, **changes: Any) -> AsyncIterator[Ledger]:
        if not made:
            pg = request.getfixturevalue("pg_url") if db_kind == "postgresql" else None
            made["url"] = await database_url(db_kind, tmp_path, pg)
        store = await make_store("local", tmp_path, None)
        values: dict[str, Any] = dict(
            database_url=made["url"], store_url=store.url, upload_deadline=60,
            sweep_after=180, delete_grace=0, processors=("content-type",))
        values.update(changes)
        async with Ledger(Database(made["url"]), store, Settings(**values),
                          clock_offset=clock_offset) as ledger:
            yield ledger

    return opened
