"""A pooled PostgreSQL connection that died while idle (the server restarted, an idle timeout,
``pg_terminate_backend``): the pool does not ping it at checkout; the transaction's BEGIN
finds it gone and the transaction is begun once more on a fresh connection. Nothing that
may have reached the server is run again: a cut statement or COMMIT raises to the caller.

PostgreSQL only (SQLite has no connection to lose); the cuts go through
:mod:`tests.support.pgproxy`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from blobledger.db import Database, connection_lost
from tests.support.pgproxy import PgProxy, When
from tests.support.services import create_database, drop_database

BEGIN, INSERT, COMMIT = r"^\s*BEGIN", r"^INSERT INTO probe\b", r"^\s*COMMIT"


@pytest.fixture
async def scratch() -> AsyncIterator[str]:
    """A fresh database with one table, ``probe``."""
    url = await create_database()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE probe (n integer)")
    finally:
        await conn.close()
    yield url
    await drop_database(url)


@pytest.fixture
def proxy(scratch: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(scratch).port or 5432) as running:
        yield running


async def rows(url: str) -> list[int]:
    conn = await asyncpg.connect(url)
    try:
        return [r["n"] for r in await conn.fetch("SELECT n FROM probe ORDER BY n")]
    finally:
        await conn.close()


def count(proxy: PgProxy, pattern: str) -> int:
    return sum(1 for sql in proxy.statements if re.search(pattern, sql, re.IGNORECASE))


async def insert(db: Database, n: int) -> int:
    """Insert ``n`` in one transaction; the backend's pid."""
    async with db.transaction() as conn:
        await conn.execute(text("INSERT INTO probe VALUES (:n)"), {"n": n})
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def terminate(url: str, pids: set[int]) -> None:
    """The server ends these backends (as a restart or an idle timeout would)."""
    admin = await asyncpg.connect(url)
    try:
        for pid in pids:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    await asyncio.sleep(0.2)  # the terminations reach the idle connections' sockets


async def test_killed_pooled_connections_are_replaced_by_one_retry(scratch: str) -> None:
    db = Database(scratch)
    try:
        # three connections in the pool, then every one of them terminated by the server
        pids = set(await asyncio.gather(*(insert(db, n) for n in (1, 2, 3))))
        assert len(pids) == 3
        await terminate(scratch, pids)
        # each next transaction succeeds: the first's BEGIN finds its connection gone, and
        # every connection the pool held is replaced (none is found dead a second time)
        after = [await insert(db, n) for n in (4, 5, 6)]
        assert not pids & set(after)
        async with db.session() as session:
            assert (await session.execute(text("SELECT count(*) FROM probe"))).scalar_one() == 6
    finally:
        await db.dispose()
    assert await rows(scratch) == [1, 2, 3, 4, 5, 6]


async def test_the_health_check_replaces_a_killed_pooled_connection(scratch: str) -> None:
    db = Database(scratch)
    try:
        await terminate(scratch, {await insert(db, 1)})
        await db.ping()  # no DatabaseUnavailable: the dead connection was replaced
    finally:
        await db.dispose()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_cut_begin_is_begun_again_once(scratch: str, proxy: PgProxy,
                                               when: When) -> None:
    """BEGIN cut before it is sent, or after it ran unanswered (the server rolls the empty
    transaction back): the transaction is begun on a fresh connection and succeeds."""
    db = Database(proxy.url(scratch))
    try:
        await insert(db, 0)  # a pooled connection
        proxy.arm(BEGIN, when)
        await insert(db, 1)
        assert proxy.fired and re.search(BEGIN, proxy.fired[0][1], re.IGNORECASE)
        assert count(proxy, INSERT) == 2  # the warm-up's and this one's: the insert ran once
    finally:
        await db.dispose()
    assert await rows(scratch) == [0, 1]


async def test_begin_is_tried_twice_at_most(scratch: str, proxy: PgProxy) -> None:
    """The database stays away: the second BEGIN fails too, and the error is the caller's
    (a lost connection), not a third try."""
    db = Database(proxy.url(scratch))
    try:
        await insert(db, 0)
        begins = count(proxy, BEGIN)
        proxy.arm(BEGIN, "before", then_down=True)
        with pytest.raises(DBAPIError) as raised:
            await insert(db, 1)
        assert connection_lost(raised.value)
        assert count(proxy, BEGIN) - begins == 2
        assert count(proxy, INSERT) == 1
        proxy.disarm()
        await insert(db, 2)  # back: the pool reconnects
    finally:
        await db.dispose()
    assert await rows(scratch) == [0, 2]


@pytest.mark.parametrize(("pattern", "when", "applied"), [
    (INSERT, "before", False), (COMMIT, "before", False), (COMMIT, "after", True)])
async def test_a_cut_statement_or_commit_is_never_run_again(
        scratch: str, proxy: PgProxy, pattern: str, when: When, applied: bool) -> None:
    """Once the transaction's first statement was sent, a lost connection is the caller's:
    the insert is sent once, and a COMMIT that applied unanswered is not repeated."""
    db = Database(proxy.url(scratch))
    try:
        await insert(db, 0)
        proxy.arm(pattern, when)
        with pytest.raises(DBAPIError) as raised:
            await insert(db, 1)
        assert connection_lost(raised.value)
        assert proxy.fired
        assert count(proxy, INSERT) == 2
        assert count(proxy, COMMIT) == (2 if pattern == COMMIT else 1)
    finally:
        await db.dispose()
    assert await rows(scratch) == ([0, 1] if applied else [0])
