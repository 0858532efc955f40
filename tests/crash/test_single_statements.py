"""C1 and C4 as one autocommit statement each (``protocol/single.py``), on PostgreSQL: an
unkeyed creation under the deferred retag sends exactly two statements to the database (no
BEGIN, no COMMIT), and pooled connections the server ended while idle cost no request (C1
runs once more, C4 once more, each recognising its own first run). The cuts at each of the
two statements, with the database back at once or staying away, are in ``test_db_faults.py``
(op ``create-one``); the race with a sweeper's claim in ``tests/ledger/test_deferred_retag.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from blobledger.errors import IntentLost
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import EventRow
from blobledger.workers.invariants import check
from tests.crash.child import Target
from tests.crash.conftest import make_target
from tests.crash.harness import RESOLVE_AT, read_all, settle
from tests.ledger.test_fencing import outcome, started
from tests.support.holds import Holds
from tests.support.pgproxy import PgProxy


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


async def deferred_target(tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    return dataclasses.replace(await make_target("postgresql-local", tmp_path, request),
                               retag="deferred")


async def events_of(ledger: Ledger) -> list[tuple[str, str]]:
    async with ledger.db.session(readonly=True) as session:
        return [(r.type, r.subject) for r in (await session.execute(
            select(EventRow).order_by(EventRow.id))).scalars()]


async def test_an_unkeyed_deferred_create_sends_two_statements(
        tmp_path: Path, request: pytest.FixtureRequest, proxy: PgProxy) -> None:
    direct = await deferred_target(tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    async with target.ledger() as ledger:
        await ledger.create("warm.txt", b"the pool's first connection")
        proxy.statements.clear()
        doc = await ledger.create("one.txt", b"two statements")
        sent = list(proxy.statements)
        assert [re.match(r"\s*(\w+ \w+)", sql).group(1) for sql in sent  # type: ignore[union-attr]
                ] == ["WITH c1_document", "WITH c4_blob"], sent
        assert await read_all(ledger, doc.id) == b"two statements"
        assert (doc.status, doc.version) == ("ready", 1)
        # the statement wrote the event a transaction would have (one per document)
        assert [e for e in await events_of(ledger) if e[1] == doc.id] == [
            ("document.ready", doc.id)]
        report = await check(ledger)
        assert report.ok, report.render()


async def test_a_keyed_create_keeps_its_transactions(
        tmp_path: Path, request: pytest.FixtureRequest, proxy: PgProxy) -> None:
    """Under an idempotency key, C1 reserves the key and C4 records the first response:
    both stay transactions (BEGIN ... COMMIT)."""
    direct = await deferred_target(tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    async with target.ledger() as ledger:
        await ledger.create("warm.txt", b"warm")
        proxy.statements.clear()
        await ledger.create("keyed.txt", b"keyed", idempotency_key="k-1")
        assert not [sql for sql in proxy.statements if sql.lstrip().startswith("WITH c")]
        # the key's lookup, C1 and C4
        assert sum(1 for sql in proxy.statements if re.match(r"\s*COMMIT", sql)) == 3


async def server_pids(url: str, database: str) -> set[int]:
    admin = await asyncpg.connect(url)
    try:
        return {r["pid"] for r in await admin.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
            database)}
    finally:
        await admin.close()


async def terminate(url: str, pids: set[int]) -> None:
    admin = await asyncpg.connect(url)
    try:
        for pid in pids:
            await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


@pytest.mark.parametrize("settle", [0.2, 0.0], ids=["noticed", "unnoticed"])
async def test_pooled_connections_ended_by_the_server_cost_no_request(
        tmp_path: Path, request: pytest.FixtureRequest, settle: float) -> None:
    """Every pooled connection ended by the server (a restart, an idle timeout), with the
    event loop given time to notice the closed sockets or not: the next creations all
    succeed, each exactly once."""
    target = await deferred_target(tmp_path, request)
    database = make_url(target.database_url).database
    assert database is not None
    async with target.ledger() as ledger:
        first = await asyncio.gather(*(ledger.create(f"before-{n}.txt", b"b") for n in range(3)))
        pids = await server_pids(target.database_url, database)
        assert pids
        await terminate(target.database_url, pids)
        await asyncio.sleep(settle)
        after = [await ledger.create(f"after-{n}.txt", b"a%d" % n) for n in range(4)]
        assert not pids & await server_pids(target.database_url, database)
        docs = sorted([d.name async for d in ledger.list()])
        assert docs == sorted([d.name for d in first] + [d.name for d in after])
        for n, doc in enumerate(after):
            assert await read_all(ledger, doc.id) == b"a%d" % n
        report = await check(ledger)
        assert report.ok, report.render()


@pytest.mark.parametrize("point", ["create.after_insert", "create.after_upload"])
async def test_a_writer_paused_past_its_deadline_around_the_statements_loses(
        tmp_path: Path, request: pytest.FixtureRequest, holds: Holds, point: str) -> None:
    """The writer stalls after its one-statement C1 (or after its upload, before its
    one-statement C4) while the sweeper, the deletion path and ``reconcile --fix`` run far
    past every cutoff; when it wakes, C4 loses: nothing acknowledged, nothing left."""
    target = await deferred_target(tmp_path, request)
    async with target.ledger() as ledger:
        holds.at(point)
        writer = started(lambda: ledger.create("paused.txt", b"paused around one statement"))
        await holds.wait(point)
        async with target.ledger(clock_offset=RESOLVE_AT) as other:
            await settle(other)
        holds.go(point)
        result = await outcome(writer)
        assert isinstance(result, IntentLost), result
    async with target.ledger(clock_offset=RESOLVE_AT) as later:
        await settle(later)
        assert [d async for d in later.list()] == []
        assert [b async for b in later.store.list()] == []
        report = await check(later, settled=True)
        assert report.ok, report.render()
