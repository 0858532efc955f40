"""On PostgreSQL the SQLAlchemy integration's detach and owner delete stamp ``deleting`` at
the commit (tests/dj/test_grace.py for Django's): a transaction that ran for a while before
it commits never starts the grace at its own start (``now()``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.orm import Session, sessionmaker

from blobledger import Ledger
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

