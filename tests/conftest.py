"""Shared fixtures: real Azurite, real PostgreSQL, real commits; never mocks."""

from __future__ import annotations

import asyncio
import atexit
import logging
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import text

from blobledger import Ledger, failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.migrate import migrate_database
from blobledger.stores import Store
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from tests.support.holds import Holds
from tests.support.services import (
    Azurite,
    MotoS3,
    create_database,
    drop_database,
    start_azurite,
    start_moto,
)

T = TypeVar("T")
DATABASES = ["sqlite", "postgresql"]
STORES = ["local", "azure"]
#: every database with every store, and S3 (moto's server) on PostgreSQL
BACKENDS = [f"{d}-{s}" for d in DATABASES for s in STORES] + ["postgresql-s3"]

# Which tests run on which backends. The ``ledger`` fixture's default is the whole matrix,
# BACKENDS: every test whose outcome the protocol's statements or a store's calls decide
# (writes, reads, leases, fences, sweeps and reconciles, staged, multipart and direct
# uploads, tags, crashes and races, attachments, events, variants) runs on every database
# with every store. Two narrower sets are for what neither decides; a test names its set
# with ``@pytest.mark.parametrize("backend", ..., indirect=True)`` and a docstring or
# comment saying why:
#: what the HTTP layer decides before the protocol opens a transaction or a store call
#: (input validation, problem bodies, tokens and scopes, static files, headers): one backend
ONE_BACKEND = ["sqlite-local"]
#: what the database decides and no store call takes part in (counts and listings inside a
#: transaction, paging): each database, on local disk
EACH_DATABASE = ["sqlite-local", "postgresql-local"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` first, the rest in their order: spread over the workers
    (scripts/test: ``--dist worksteal``), the long ones start early and the short ones fill in
    around them, instead of a long one starting last and holding the whole run."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(autouse=True)
def _root_log_handlers() -> Iterator[None]:
    """The root logger's handlers as they were: a command run in this process
    (``CliRunner``) installs one on the stream it captured, closed once it returns."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    instance = start_azurite()
    yield instance
    instance.stop()


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoS3]:
    instance = start_moto()
    yield instance
    instance.stop()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _migrated_database() -> str:
    url = await create_database()
    db = Database(url)
    await migrate_database(db)
    await db.dispose()
    return url


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    url = run_sync(_migrated_database())
    yield url
    run_sync(drop_database(url))


def new_container() -> str:
    return f"t{uuid.uuid4().hex[:20]}"


async def make_store(
    kind: str, tmp_path: Path, azurite: Azurite | None, *,
    single_put_limit: int = 256 * 1024, block_size: int = 128 * 1024,
    moto: MotoS3 | None = None,
) -> Store:
    """A fresh store; Azure and S3 with small single-put limits so staged and multipart
    uploads are exercised."""
    if kind == "local":
        return LocalStore(tmp_path / "store")
    if kind == "s3":
        assert moto is not None
        s3 = moto.store(single_put_limit=single_put_limit)
        await s3.prepare()
        return s3
    assert azurite is not None
    store = AzureStore(new_container(), connection_string=azurite.connection_string,
                       single_put_limit=single_put_limit, block_size=block_size)
    await store.prepare()
    return store


_SQLITE_TEMPLATE: list[Path] = []


async def sqlite_template() -> Path:
    """A SQLite ledger database migrated once in this process: each test's database is a copy
    (what the migrations make, without running the eleven of them per test; the ledger still
    checks its revision on opening, and tests/ledger/test_migrations.py runs them)."""
    if not _SQLITE_TEMPLATE:
        folder = Path(tempfile.mkdtemp(prefix="blobledger-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        db = Database(f"sqlite:///{folder / 'ledger.db'}")
        await migrate_database(db)
        await db.dispose()
        _SQLITE_TEMPLATE.append(folder / "ledger.db")
    return _SQLITE_TEMPLATE[0]


async def database_url(kind: str, tmp_path: Path, pg_url: str | None) -> str:
    """A migrated, empty ledger database: a copy of the migrated SQLite template in
    ``tmp_path``, or the worker's PostgreSQL database emptied."""
    if kind == "sqlite":
        path = tmp_path / "ledger.db"
        if not path.exists():
            shutil.copyfile(await sqlite_template(), path)
        return f"sqlite:///{path}"
    assert pg_url is not None
    db = Database(pg_url)
    async with db.session() as session:
        await session.execute(text("TRUNCATE documents, blobs, idempotency_keys, uploads, "
                                   "events, event_deliveries, processing"))
        await session.execute(text("DELETE FROM buckets WHERE name <> 'default'"))
    await db.dispose()
    return pg_url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def ledger(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Ledger]:
    db_kind, store_kind = backend.split("-")
    pg = request.getfixturevalue("pg_url") if db_kind == "postgresql" else None
    az = request.getfixturevalue("azurite") if store_kind == "azure" else None
    s3 = request.getfixturevalue("moto") if store_kind == "s3" else None
    url = await database_url(db_kind, tmp_path, pg)
    store = await make_store(store_kind, tmp_path, az, single_put_limit=256 * 1024,
                             block_size=128 * 1024, moto=s3)
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as instance:
        yield instance


@pytest.fixture
def holds(monkeypatch: pytest.MonkeyPatch) -> Iterator[Holds]:
    """Writers held at named failpoints until released (``tests.support.holds``)."""
    held = Holds()
    real = failpoints.hit

    async def hit(point: str) -> None:
        await held.hit(point)
        await real(point)

    monkeypatch.setattr(failpoints, "hit", hit)
    yield held
    held.release_all()

