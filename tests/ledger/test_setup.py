"""Opening a ledger: URLs as users write them, and one clear error when they are wrong."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
import pytest
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    event,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine

from blobledger import ConfigError, DatabaseUnavailable, Ledger
from blobledger.config import Settings
from blobledger.db import Database, normalise_url
from blobledger.stores import open_store
from blobledger.stores.local import LocalStore
from tests.support.services import Azurite, free_port


async def test_plain_urls_work_as_written(tmp_path: Path, pg_url: str) -> None:
    for db_url in (f"sqlite:///{tmp_path / 'x.db'}", pg_url):
        async with Ledger.from_urls(db_url, f"file://{tmp_path / 'blobs'}") as ledger:
            doc = await ledger.create(f"plain-{ledger.db.engine.dialect.name}", b"ok")
            assert doc.status == "ready"
            await ledger.delete(doc.id)


async def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    ledger = Ledger.from_urls(f"sqlite:///{tmp_path / 'w.db'}", f"file://{tmp_path / 'b'}")
    async with ledger, ledger.db.engine.connect() as conn:
        assert (await conn.execute(text("PRAGMA journal_mode"))).scalar() == "wal"


async def test_a_sqlite_connection_left_in_a_transaction_is_rolled_back_at_checkin(
        tmp_path: Path) -> None:
    """The pool does not roll back every SQLite connection it takes back (one driver call
    each), only one a transaction is still open on: its uncommitted write and its write lock
    do not reach the next user of the connection."""
    db = Database(f"sqlite:///{tmp_path / 'r.db'}")
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER)"))
        async with db.engine.connect() as conn:  # a transaction the engine does not know of
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
            await driver.execute("BEGIN IMMEDIATE")
            await driver.execute("INSERT INTO t VALUES (1)")
            assert driver.in_transaction
        async with db.engine.connect() as conn:  # the same pooled connection
            again = (await conn.get_raw_connection()).driver_connection
            assert again is driver and not again.in_transaction
        async with db.transaction() as conn:
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 0
    finally:
        await db.dispose()


async def test_a_sqlite_statement_is_one_trip_to_the_connections_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ledger's SQLite engine runs a statement, its rows and its cursor's close in one
    call on aiosqlite's thread: what SQLAlchemy reads of it (rows, row count, a constraint's
    error as IntegrityError) is what the driver's cursor gave."""
    db = Database(f"sqlite:///{tmp_path / 'trips.db'}")
    trips = 0
    original = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal trips
        trips += 1
        return await original(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE t (x INTEGER PRIMARY KEY, y TEXT)"))
        monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
        async with db.transaction() as conn:
            trips = 0
            rows = (await conn.execute(text(
                "INSERT INTO t (x, y) VALUES (1, 'a'), (2, 'b') RETURNING x, y"))).all()
            assert trips == 1 and [tuple(r) for r in rows] == [(1, "a"), (2, "b")]
            changed = await conn.execute(text("UPDATE t SET y = 'c' WHERE x >= :x"), {"x": 1})
            assert trips == 2 and changed.rowcount == 2
            assert (await conn.execute(text("SELECT y FROM t WHERE x = 2"))).scalar() == "c"
            assert trips == 3
        with pytest.raises(IntegrityError):
            async with db.transaction() as conn:
                await conn.execute(text("INSERT INTO t (x, y) VALUES (1, 'again')"))
        async with db.transaction(readonly=True) as conn:
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar() == 2
    finally:
        await db.dispose()


async def test_a_postgresql_statement_on_the_driver_gives_its_pooled_connection_back(
        pg_url: str) -> None:
    """A one-statement step on PostgreSQL (``Database.fetch_one``: C1 and C4 alone) takes a
    connection from the engine's pool, sends the statement compiled from its expression in
    autocommit (it commits as it runs) and gives the connection back, after a refused key
    too (SQLAlchemy's IntegrityError); one cancelled under its statement is discarded (its
    state on the wire unknown), and the next step gets another."""
    db = Database(pg_url)
    pool: Any = db.engine.sync_engine.pool
    name = f"t_{uuid.uuid4().hex[:12]}"
    rows = Table(name, MetaData(), Column("x", Integer, primary_key=True), Column("y", Text))
    add = insert(rows).values(x=bindparam("x"), y=bindparam("y")).returning(rows.c.x, rows.c.y)
    try:
        async with db.transaction() as conn:
            await conn.run_sync(rows.metadata.create_all)
        row = await db.fetch_one(add, {"x": 1, "y": "a"})
        assert row is not None and (row.x, row.y) == (1, "a")
        assert pool.checkedout() == 0
        with pytest.raises(IntegrityError):
            await db.fetch_one(add, {"x": 1, "y": "again"})
        assert pool.checkedout() == 0
        async with db.transaction(readonly=True) as conn:  # committed, on its own
            assert (await conn.execute(select(rows.c.y))).scalars().all() == ["a"]
        assert await db.fetch_one(select(rows.c.x).where(rows.c.x == bindparam("x")),
                                  {"x": 2}) is None
        pid = select(func.pg_backend_pid().label("pid"))
        first = await db.fetch_one(pid, {})
        sleeping = asyncio.ensure_future(db.fetch_one(
            select(func.pg_sleep(5), func.pg_backend_pid().label("pid")), {}))
        await asyncio.sleep(0.3)
        sleeping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sleeping
        assert pool.checkedout() == 0
        after = await db.fetch_one(pid, {})
        assert first is not None and after is not None and after.pid != first.pid
    finally:
        async with db.transaction() as conn:
            await conn.run_sync(rows.metadata.drop_all)
        await db.dispose()


async def test_a_statement_on_the_driver_ends_a_transaction_left_open_on_its_connection(
        pg_url: str) -> None:
    """An application's engine that does not roll back at checkin may hand over a connection
    with a transaction still open on it: the step's statement does not run (and commit
    nothing) inside it; the transaction is rolled back first, as setting the connection to
    autocommit would."""
    engine = create_async_engine(normalise_url(pg_url), pool_size=1, max_overflow=0,
                                 pool_reset_on_return=None)
    db = Database.from_engine(engine)
    name = f"t_{uuid.uuid4().hex[:12]}"
    rows = Table(name, MetaData(), Column("x", Integer, primary_key=True))
    try:
        async with engine.begin() as conn:
            await conn.run_sync(rows.metadata.create_all)
        async with engine.connect() as conn:  # a transaction the engine does not know of
            adapted: Any = (await conn.get_raw_connection()).dbapi_connection
            await adapted._start_transaction()
            await adapted._connection.execute(f"INSERT INTO {name} VALUES (1)")
        assert adapted._transaction is not None  # back in the pool, still open
        added = await db.fetch_one(insert(rows).values(x=bindparam("x")).returning(rows.c.x),
                                   {"x": 2})
        assert added is not None and added.x == 2 and adapted._transaction is None
        async with engine.connect() as conn:
            assert (await conn.execute(select(rows.c.x))).scalars().all() == [2]
    finally:
        async with engine.begin() as conn:
            await conn.run_sync(rows.metadata.drop_all)
        await engine.dispose()


async def test_a_create_on_postgresql_sends_its_steps_on_the_driver_unless_observed(
        tmp_path: Path, pg_url: str) -> None:
    """An unkeyed create under the deferred retag runs C1 and C4 as one statement each: on
    the driver while the engine's execution has no listeners (``Database.driver_runs``
    counts them); once an application listens to ``before_cursor_execute`` on the engine,
    through SQLAlchemy, and the listener sees both statements; once it is removed, on the
    driver again (SQLAlchemy's mark of an engine that had listeners stays: the event lists
    themselves are asked)."""
    db = Database(pg_url)
    tag = uuid.uuid4().hex[:8]  # the database is the session's
    seen: list[tuple[str, bool]] = []

    def listener(_conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any,
                 executemany: bool) -> None:
        seen.append((" ".join(statement.split()[:2]), executemany))

    async with Ledger(db, LocalStore(str(tmp_path / "blobs")),
                      Settings(retag="deferred")) as ledger:
        assert not db.observed()
        await ledger.create(f"fast-{tag}.txt", b"on the driver")
        assert db.driver_runs == 2
        event.listen(db.engine.sync_engine, "before_cursor_execute", listener)
        assert db.observed()
        doc = await ledger.create(f"seen-{tag}.txt", b"through SQLAlchemy")
        assert db.driver_runs == 2
        assert ("WITH c1_document", False) in seen and ("WITH c4_blob", False) in seen
        assert (doc.status, doc.version) == ("ready", 1)
        event.remove(db.engine.sync_engine, "before_cursor_execute", listener)
        assert db.engine.sync_engine._has_events and not db.observed()
        seen.clear()
        await ledger.create(f"fast-again-{tag}.txt", b"on the driver again")
        assert db.driver_runs == 4 and seen == []


@pytest.mark.parametrize("observed", [False, True], ids=["driver", "observed"])
async def test_a_one_statement_step_has_the_same_outcomes_on_both_paths(
        pg_url: str, observed: bool) -> None:
    """``fetch_one`` and ``fetch_each`` (C1's and C4's statements, alone and batched) give
    the same rows and the same errors on the driver and, when the engine's execution is
    observed, through SQLAlchemy: an IntegrityError for a refused key (a batch applies all
    its runs or none), ``connection_invalidated`` for a connection the server ended (the
    callers' recovery), and the next statement on a fresh connection. Observed, a batch is
    one ``executemany`` to the listeners, with every run's parameters, and its error goes
    through ``handle_error``."""
    engine = create_async_engine(normalise_url(pg_url), pool_size=1, max_overflow=0)
    db = Database.from_engine(engine)
    name = f"t_{uuid.uuid4().hex[:12]}"
    rows = Table(name, MetaData(), Column("x", Integer, primary_key=True), Column("y", Text))
    add = insert(rows).values(x=bindparam("x"), y=bindparam("y")).returning(rows.c.x, rows.c.y)
    executed: list[tuple[bool, int]] = []
    errors: list[BaseException] = []
    if observed:
        @event.listens_for(engine.sync_engine, "before_cursor_execute")
        def _executed(_conn: Any, _cursor: Any, statement: str, params: Any, _context: Any,
                      executemany: bool) -> None:
            if statement.startswith(f"INSERT INTO {name}"):
                executed.append((executemany, len(params) if executemany else 1))

        @event.listens_for(engine.sync_engine, "handle_error")
        def _error(context: Any) -> None:
            errors.append(context.original_exception)
    try:
        async with db.transaction() as conn:
            await conn.run_sync(rows.metadata.create_all)
        assert db.observed() is observed
        row = await db.fetch_one(add, {"x": 1, "y": "a"})
        assert row is not None and (row.x, row.y) == (1, "a")
        batch = await db.fetch_each(add, [{"x": 2, "y": "b"}, {"x": 3, "y": "c"}])
        assert sorted((r.x, r.y) for r in batch) == [(2, "b"), (3, "c")]
        with pytest.raises(IntegrityError):
            await db.fetch_one(add, {"x": 1, "y": "again"})
        with pytest.raises(IntegrityError):
            await db.fetch_each(add, [{"x": 4, "y": "d"}, {"x": 2, "y": "again"}])
        assert await db.fetch_one(select(rows.c.x).where(rows.c.x == bindparam("x")),
                                  {"x": 4}) is None  # the batch applied none of its runs
        async with db.transaction(readonly=True) as conn:
            assert sorted((await conn.execute(select(rows.c.y))).scalars().all()) == [
                "a", "b", "c"]
        pid = select(func.pg_backend_pid().label("pid"))
        for send in (lambda: db.fetch_one(add, {"x": 5, "y": "e"}),
                     lambda: db.fetch_each(add, [{"x": 5, "y": "e"}])):
            first = await db.fetch_one(pid, {})
            assert first is not None
            admin = await asyncpg.connect(pg_url)
            try:
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", first.pid)
            finally:
                await admin.close()
            await asyncio.sleep(0.1)
            with pytest.raises(DBAPIError) as lost:
                await send()
            assert lost.value.connection_invalidated
            after = await db.fetch_one(pid, {})
            assert after is not None and after.pid != first.pid
        assert engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
        if observed:
            assert executed == [(False, 1), (True, 2), (False, 1), (True, 2), (False, 1),
                                (True, 1)]
            assert len(errors) == 4  # two refused keys, two lost connections
            assert db.driver_runs == 0
        else:
            assert executed == [] and db.driver_runs > 0
    finally:
        async with db.transaction() as conn:
            await conn.run_sync(rows.metadata.drop_all)
        await engine.dispose()


async def test_from_env_uses_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azurite: Azurite
) -> None:
    monkeypatch.setenv("BLOBLEDGER_DATABASE_URL", f"sqlite:///{tmp_path / 'env.db'}")
    monkeypatch.setenv("BLOBLEDGER_STORE_URL", "azure://fromenvcontainer")
    monkeypatch.setenv("BLOBLEDGER_AZURE_CONNECTION_STRING", azurite.connection_string)
    async with Ledger.from_env() as ledger:
        doc = await ledger.create("env.txt", b"from the environment")
        assert [i.name async for i in ledger.store.list()] == [doc.blob]


@pytest.mark.parametrize(("store_url", "message"), [
    ("gs://bucket", "unsupported store URL"),
    ("s3://", "names no bucket"),
    ("ftp://host/x", "unsupported store URL"),
    ("azure://ab", "3-63 characters"),
    ("azure://container", "needs BLOBLEDGER_AZURE_CONNECTION_STRING"),
])
def test_bad_store_urls(store_url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(store_url)


async def test_unreachable_database_is_one_clear_error(tmp_path: Path) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(DatabaseUnavailable, match="database unreachable"):
        async with Ledger.from_urls(url, f"file://{tmp_path}"):
            pass


def test_unknown_database_scheme(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unsupported database"):
        Ledger.from_urls("mysql://root@localhost/db", f"file://{tmp_path}")
