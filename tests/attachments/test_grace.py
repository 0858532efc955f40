"""On PostgreSQL the SQLAlchemy integration's detach and owner delete stamp ``deleting`` at
the commit (tests/dj/test_grace.py for Django's): a transaction that ran for a while before
it commits never starts the grace at its own start (``now()``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session, sessionmaker

from blobledger import Ledger
from blobledger.sqlalchemy import CLOCK_OFFSET
from blobledger.workers.sweeper import Sweeper, SweepReport
from tests.attachments.conftest import Invoice

POSTGRESQL = pytest.mark.parametrize("backend", ["postgresql-local"], indirect=True)


def _clock(conn: Connection) -> datetime:
    now, started = conn.execute(text(
        "SELECT clock_timestamp() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'")).one()
    assert now > started
    return now  # type: ignore[no-any-return]


def _replace(session: Session) -> None:
    session.get_one(Invoice, 1).pdf = None


def _delete(session: Session) -> None:
    session.delete(session.get_one(Invoice, 1))


@POSTGRESQL
@pytest.mark.parametrize("change", [_replace, _delete])
async def test_a_detach_in_a_long_session_is_deleting_from_its_commit(
        ledger: Ledger, sessions: sessionmaker[Session],
        change: Callable[[Session], None]) -> None:
    staged = await ledger.stage(b"v1", filename="v1.pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))
    with sessions.begin() as session:
        change(session)
        session.flush()
        before_commit = _clock(session.connection())
    with sessions() as session:
        since = session.execute(text(
            "SELECT changed_at FROM blobs WHERE name = :n AND state = 'deleting'"),
            {"n": staged.name}).scalar_one()
    assert since >= before_commit



SQLITE = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
#: how much longer than the clock-skew allowance (60 s) the transaction runs on
HELD = 90.0
GRACE = 300.0


@SQLITE
@pytest.mark.parametrize("change", [_replace, _delete])
async def test_on_sqlite_a_detach_in_a_long_session_is_deleting_from_its_commit(
        ledger: Ledger, sessions: sessionmaker[Session],
        change: Callable[[Session], None]) -> None:
    """SQLite has no deferred trigger: ``before_commit`` stamps the detached blobs again as
    the transaction's last statement. Here the session's clock moves ``HELD`` s between
    the flush that detached and the commit (a transaction held that long): the grace counts
    from the commit, and a sweeper past the flush's grace, not the commit's, keeps the
    bytes."""
    ledger.settings = ledger.settings.with_(delete_grace=GRACE)
    staged = await ledger.stage(b"v1", filename="v1.pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))

    def held() -> datetime:
        with sessions.begin() as session:
            change(session)
            session.flush()
            stamped = _stamp(session.connection(), staged.name)
            session.info[CLOCK_OFFSET] = HELD  # the commit comes HELD s later
        return stamped

    stamped = await asyncio.to_thread(held)
    with sessions() as session:
        since = _stamp(session.connection(), staged.name)
    assert (since - stamped).total_seconds() >= HELD
    report = await _sweep_at(ledger, GRACE + HELD / 2)  # past the flush's grace only
    assert report.deleted == 0
    assert (await ledger.store.stat(staged.name)).size == 2  # the bytes are still there
    assert (await _sweep_at(ledger, GRACE + HELD + 1)).deleted == 1  # past the commit's


@SQLITE
async def test_on_sqlite_the_restamp_moves_only_what_its_transaction_detached(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """The re-stamp before COMMIT moves the names its own transaction detached, never a blob
    another transaction left deleting earlier, of another owner row or of the same one
    (whose grace would start again at every commit, and whose bytes would wait for a quiet
    moment that may never come)."""
    first = await ledger.stage(b"v1", filename="v1.pdf")
    second = await ledger.stage(b"v2", filename="v2.pdf")
    third = await ledger.stage(b"v3", filename="v3.pdf")
    fourth = await ledger.stage(b"v4", filename="v4.pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=first))
        session.add(Invoice(id=2, number="INV-2", pdf=second))
    with sessions.begin() as session:
        session.get_one(Invoice, 1).pdf = third  # v1: deleting from this commit
    with sessions() as session:
        earlier = _stamp(session.connection(), first.name)

    def later() -> None:
        with sessions.begin() as session:
            session.get_one(Invoice, 1).pdf = fourth  # v3 detached from the same owner
            session.delete(session.get_one(Invoice, 2))
            session.flush()
            session.info[CLOCK_OFFSET] = HELD  # the commit comes HELD s later

    await asyncio.to_thread(later)
    with sessions() as session:
        assert _stamp(session.connection(), first.name) == earlier
        for detached in (second, third):
            assert (_stamp(session.connection(), detached.name)
                    - earlier).total_seconds() >= HELD


def _stamp(conn: Connection, name: str) -> datetime:
    value = conn.execute(text(
        "SELECT changed_at FROM blobs WHERE name = :n AND state = 'deleting'"),
        {"n": name}).scalar_one()
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


async def _sweep_at(ledger: Ledger, offset: float) -> SweepReport:
    saved = ledger.clock_offset
    ledger.clock_offset = offset
    try:
        return await Sweeper(ledger).run_once()
    finally:
        ledger.clock_offset = saved
