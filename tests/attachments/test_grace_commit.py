"""The deferred trigger that moves a detach's ``deleting`` stamp to the commit (the ledger's
migration 0011, PostgreSQL) with the connection cut during the ``COMMIT``
(:mod:`tests.support.pgproxy`, as ``test_db_faults.py`` cuts statements): the application's
transaction detached a file through the SQLAlchemy integration, then

- the ``COMMIT`` is cut before it is sent: the transaction never applied, the trigger never
  ran; the blob is still attached to its row, which still names it;
- the ``COMMIT`` runs and its answer is lost: the transaction applied, the trigger ran
  inside it (the stamp is the commit's, not the transaction's start), and the application
  never heard.

Either way the rows and the blobs agree, and after the sweeper and the deletion path hours
ahead nothing is left over."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from blobledger import Ledger
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.attachments.conftest import Invoice, app_url
from tests.support.pgproxy import PgProxy, When

POSTGRESQL = pytest.mark.parametrize("backend", ["postgresql-local"], indirect=True)
COMMIT = r"^\s*COMMIT"


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


def _clock(conn: Connection) -> datetime:
    now, started = conn.execute(text(
        "SELECT clock_timestamp() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'")).one()
    assert now > started  # the transaction has run a while
    return now  # type: ignore[no-any-return]


def _blob(sessions: sessionmaker[Session], name: str) -> tuple[str, datetime]:
    with sessions() as session:
        state, since = session.execute(text(
            "SELECT state, changed_at FROM blobs WHERE name = :n"), {"n": name}).one()
    return str(state), since


@POSTGRESQL
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("how", ["clear", "delete"])
async def test_a_detachs_commit_cut(ledger: Ledger, sessions: sessionmaker[Session],
                                    proxy: PgProxy, when: When, how: str) -> None:
    staged = await ledger.stage(b"v1", filename="v1.pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))
    engine = create_engine(app_url(proxy.url(ledger.db.url)))  # the application's, cut
    try:
        session = Session(engine)
        row = session.get_one(Invoice, 1)
        if how == "clear":
            row.pdf = None
        else:
            session.delete(row)
        session.flush()  # the detach ran: deleting, stamped with the transaction's start
        before_commit = _clock(session.connection())
        proxy.arm(COMMIT, when)  # only the application goes through the proxy
        with pytest.raises(DBAPIError):
            session.commit()
        assert proxy.fired and proxy.fired[-1][0] == when
        session.close()
    finally:
        proxy.disarm()
        engine.dispose()
    state, since = _blob(sessions, staged.name)
    with sessions() as check_session:
        row_after = check_session.get(Invoice, 1)
        named = row_after.pdf.name if row_after is not None and row_after.pdf else None
    if when == "before":  # never applied: still attached, still the row's
        assert (state, named) == ("attached", staged.name)
    else:  # applied unanswered: the trigger ran inside the commit
        assert state == "deleting" and named is None
        assert since >= before_commit
    assert (await check(ledger)).ok
    ledger.settings = ledger.settings.with_(delete_grace=300.0)
    ledger.clock_offset = 4 * 3600
    await Sweeper(ledger).run_once()
    assert (await check(ledger, settled=True)).ok
