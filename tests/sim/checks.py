"""The outbox's check: exactly one event per committed change of a document, in commit order.

A document's changes are its versions: C4 (or the sweeper's roll-forward, C4 on a dead
writer's behalf) makes version 1 ready and writes ``document.ready``; each R4 moves the
version one up and writes ``document.replaced`` with it; a delete removes the row and writes
``document.deleted`` with the last version. Each event is inserted in the change's own
transaction, so on any committed snapshot of the database a document's events, in the order
of their ``id`` (SQLite's writers take turns: the order of their commits), are exactly
``ready v1, replaced v2, ..., replaced vN`` and, once it is gone, ``deleted vN``: a missing
event, one written twice or by a change that did not commit, or two out of order, breaks
that shape, and the last event names the row's current version, blob and checksum.

The check reads the documents and the events in one read-only transaction (one snapshot,
no write lock: WAL reads beside the writers), so it runs while the actors run: after every
operation of an actor (:meth:`tests.sim.sim._Run.op`) and at the stop-the-world checks. It
reads through a connection of its own of Python's ``sqlite3``, synchronously: it never
yields to the loop, so it adds no scheduling step and a seed's schedule is the same with
the check or without it.
Against the model too: every version a client was acknowledged has its event with the
checksum it sent, and every acknowledged deletion its ``document.deleted``.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, select
from sqlalchemy.dialects import sqlite

from blobledger.protocol import events
from blobledger.protocol.models import DocumentRow, DocumentStatus, EventType

if TYPE_CHECKING:
    from tests.sim.sim import _Run

READY, REPLACED, DELETED, REJECTED = (EventType.READY.value, EventType.REPLACED.value,
                                      EventType.DELETED.value, EventType.REJECTED.value)
_d, _e = DocumentRow.__table__.c, events.events.c
_DOCUMENTS = select(_d.id, _d.status, _d.version, _d.sha256, _d.blob_name)
_EVENTS = select(_e.id, _e.type, _e.document_id, _e.version, _e.sha256, _e.blob_name).where(
    _e.document_id.is_not(None)).order_by(_e.id)


def _sql(statement: Select[Any]) -> tuple[str, Any]:
    return (str(statement.compile(dialect=sqlite.dialect())),
            namedtuple("Row", [c.name for c in statement.selected_columns]))


_QUERIES = (_sql(_DOCUMENTS), _sql(_EVENTS))


#: per connection: SQLite's ``data_version`` when it was last read, and what it read
_LAST: dict[sqlite3.Connection, tuple[int, list[Any], list[Any]]] = {}


def snapshot(conn: sqlite3.Connection) -> tuple[list[Any], list[Any]]:
    """The documents and their events, read in one transaction of ``conn`` (the check's
    own connection, in autocommit mode between its transactions); read again only if
    another connection committed since (``PRAGMA data_version``)."""
    conn.execute("BEGIN")
    try:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        last = _LAST.get(conn)
        if last is not None and last[0] == version:
            return last[1], last[2]
        found = [[row(*values) for values in conn.execute(sql)] for sql, row in _QUERIES]
    finally:
        conn.execute("COMMIT")
    _LAST[conn] = (version, found[0], found[1])
    return found[0], found[1]


def forget(conn: sqlite3.Connection) -> None:
    """Drop what was read on ``conn`` (closed at the end of its run)."""
    _LAST.pop(conn, None)


def check_change_events(run: _Run, conn: sqlite3.Connection) -> None:
    """One snapshot of the documents and their events, read on ``conn`` (see the module):
    raises :class:`tests.sim.sim.Violation`."""
    from tests.sim.sim import Violation

    documents, written = snapshot(conn)
    rows = {r.id: r for r in documents}
    run.result.event_checks += 1
    by_doc: dict[str, list[Any]] = {}
    for event in written:
        by_doc.setdefault(event.document_id, []).append(event)
    for doc_id, evs in by_doc.items():
        problem = _shape(evs, rows.get(doc_id))
        if problem is not None:
            shown = ", ".join(f"#{ev.id} {ev.type} v{ev.version}" for ev in evs)
            raise Violation(f"document {doc_id}'s events: {problem} ({shown})")
    for doc_id, row in rows.items():
        if row.status == DocumentStatus.READY.value and doc_id not in by_doc:
            raise Violation(f"document {doc_id} is ready (v{row.version}) with no event")
    for doc in run.docs.values():
        evs = by_doc.get(doc.id, [])
        if not any(ev.version == doc.version and ev.sha256 == doc.sha256
                   and ev.type in (READY, REPLACED) for ev in evs):
            raise Violation(f"document {doc.id}: its acknowledged v{doc.version} "
                            f"({doc.sha256[:8]}) has no event")
        if doc.deleted and not any(ev.type == DELETED for ev in evs):
            raise Violation(f"document {doc.id}: its acknowledged deletion has no event")


def _shape(evs: list[Any], row: Any) -> str | None:
    """What is wrong with one document's events (in ``id`` order) beside its row, if any.
    A held creation a processor rejected was never ready: its one event is
    ``document.rejected`` v1, its row gone."""
    if evs[0].type == REJECTED:
        if len(evs) > 1 or evs[0].version != 1:
            return "a rejected document with other events"
        return None if row is None else "rejected while its row is still there"
    for k, ev in enumerate(evs):
        last = k == len(evs) - 1
        if ev.type == DELETED:
            if not last:
                return "an event after the deletion"
            if k == 0 or ev.version != evs[k - 1].version:
                return f"the deletion names v{ev.version}, not the last version"
            if row is not None:
                return "a deletion while its row is still there"
            return None
        expected = READY if k == 0 else REPLACED
        if ev.type != expected or ev.version != k + 1:
            return (f"event {k + 1} is {ev.type} v{ev.version}, not {expected} v{k + 1} "
                    "(one per committed version, in order)")
    if row is None:
        return "the document is gone with no document.deleted"
    final = evs[-1]
    if (row.status != DocumentStatus.READY.value or final.version != row.version
            or final.sha256 != row.sha256 or final.blob_name != row.blob_name):
        return (f"the row is {row.status} v{row.version} {row.blob_name}, the last event "
                f"names v{final.version} {final.blob_name}")
    return None
