"""Events: a row per change, written by the change itself in its own transaction.

The writers call these (and nobody else does): C4 (``commit_create``, and the sweeper's
roll-forward, which is C4 on a dead writer's behalf) writes ``document.ready``; R4
``document.replaced``; delete ``document.deleted``; a held document's rejection
``document.rejected``; A4 ``attachment.attached``; the detach steps
``attachment.detached``. Each insert runs on the caller's connection, inside its
transaction: a rolled-back change leaves no event, a committed one exactly one. An event's
``event_id`` is the ``webhook-id`` a receiver deduplicates on; ``id`` (increasing) orders
them; ``subject`` (a document's id, an attachment's blob name) is what the delivery worker
keeps in order.

:func:`document_ready` is the one way to say "a document became ready": a writer of its own
(a step that makes a held document visible) calls it in the transaction that makes the
document ready. The delivery side's statements (claim, mark, log) are here too, so that one
module owns the ``events`` and ``event_deliveries`` tables; the worker that sends is
:mod:`blobledger.workers.delivery`.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, and_, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql import ColumnElement

from blobledger.protocol.clock import at
from blobledger.protocol.documents import Document
from blobledger.protocol.models import DeliveryRow, EventRow, EventState, EventType, as_utc
from blobledger.protocol.owners import Owner

events: Table = EventRow.__table__  # type: ignore[assignment]
deliveries: Table = DeliveryRow.__table__  # type: ignore[assignment]

NOW = at("now_s")
LEASE = at("lease_s")
LATER = at("later_s")
PENDING, DELIVERED, DEAD = (s.value for s in EventState)
#: the outcome of a logged success whose event was replayed since (sent again to its target)
REPLAYED = "ok-replayed"
#: the first characters of a delivery claim's token (an event's ``attempt``)
CLAIM_PREFIX = "e:"

#: every column named (a statement compiled without its parameters, as the Django
#: integration compiles, must still insert them all)
_WRITTEN = ("event_id", "type", "subject", "document_id", "blob_name", "owner_table",
            "owner_key", "owner_column", "version", "name", "size", "sha256", "md5",
            "content_type", "payload")
_insert_event = insert(events).values(
    state=PENDING, attempts=0, created_at=NOW, next_attempt_at=NOW, lease_until=NOW,
    **{column: bindparam(column) for column in _WRITTEN})


def new_event_id() -> str:
    """A unique event id (the ``webhook-id``): ``evt_`` and 32 hex digits."""
    return "evt_" + secrets.token_hex(16)


def claim_token() -> str:
    """A delivery worker's claim token (unique per claim)."""
    return CLAIM_PREFIX + secrets.token_hex(15)


def _row(kind: EventType, subject: str, data: dict[str, Any], **columns: Any) -> dict[str, Any]:
    values: dict[str, Any] = dict(
        document_id=None, blob_name=None, owner_table=None, owner_key=None, owner_column=None,
        version=None, name=None, size=None, sha256=None, md5=None, content_type=None)
    values.update(columns)
    return dict(values, event_id=new_event_id(), type=kind.value, subject=subject,
                payload=json.dumps(data, sort_keys=True))


def document_row(kind: EventType, doc: Document, md5: str | None = None,
                 previous_blob: str | None = None) -> dict[str, Any]:
    """The values of a document's event (``document.*``)."""
    return document_values(kind, doc.id, doc.name, doc.version, doc.size, doc.content_type,
                           doc.sha256, doc.blob, md5, previous_blob, bucket=doc.bucket)


def document_values(kind: EventType, document_id: str, name: str, version: int,
                    size: int | None, content_type: str, sha256: str | None, blob: str,
                    md5: str | None, previous_blob: str | None = None, *,
                    bucket: str) -> dict[str, Any]:
    """:func:`document_row` from the document's fields (for a step that writes the event
    in the statement that makes the document: ``protocol/single.py``)."""
    data: dict[str, Any] = {
        "document_id": document_id, "bucket": bucket, "name": name, "version": version,
        "size": size,
        "content_type": content_type, "sha256": sha256, "md5": md5, "blob": blob}
    if previous_blob is not None:
        data["previous_blob"] = previous_blob
    return _row(kind, document_id, data, document_id=document_id, blob_name=blob,
                version=version, name=name, size=size, sha256=sha256, md5=md5,
                content_type=content_type)


def attachment_row(kind: EventType, blob: Sequence[Any], owner: Owner) -> dict[str, Any]:
    """The values of an attachment's event, from a blob row read as
    :data:`ATTACHMENT_COLUMNS` (a tuple: the Django integration's rows are plain tuples)."""
    name, size, sha256, md5, content_type, filename = blob
    data = {"blob": name, "owner": {"table": owner.table, "key": owner.key,
                                    "column": owner.column},
            "filename": filename, "size": size, "content_type": content_type,
            "sha256": sha256, "md5": md5}
    return _row(kind, name, data, blob_name=name, owner_table=owner.table,
                owner_key=owner.key, owner_column=owner.column, name=filename, size=size,
                sha256=sha256, md5=md5, content_type=content_type)


def attachment_columns(blobs: Table) -> tuple[ColumnElement[Any], ...]:
    """The blob columns an attachment's event is made of, in :func:`attachment_row`'s
    order (what A4 and the detach steps return)."""
    c = blobs.c
    return (c.name, c.size, c.sha256, c.md5, c.content_type, c.filename)


# -- writing, in the writer's transaction ---------------------------------------------------
async def write(conn: AsyncConnection, rows: Sequence[dict[str, Any]],
                offset: float = 0.0) -> None:
    """Insert events on an async connection, inside the caller's transaction."""
    for row in rows:
        await conn.execute(_insert_event, dict(row, now_s=offset))


def write_sync(conn: Any, rows: Sequence[dict[str, Any]], offset: float = 0.0) -> None:
    """Insert events on a synchronous connection (an application's SQLAlchemy connection or
    the Django integration's), inside the caller's transaction."""
    for row in rows:
        conn.execute(_insert_event, dict(row, now_s=offset))


async def document_rejected(conn: AsyncConnection, doc: Document, *, md5: str | None,
                            processor: str, reason: str, offset: float = 0.0) -> None:
    """``document.rejected`` for a held ``doc`` a processor rejected, in the transaction
    that rejects it (:meth:`blobledger.protocol.held.Held.reject`): its writer's systems
    learn what became of the upload it was never told was ready."""
    row = document_row(EventType.REJECTED, doc, md5)
    data = dict(json.loads(row["payload"]), processor=processor, reason=reason)
    await write(conn, [dict(row, payload=json.dumps(data, sort_keys=True))], offset)


async def document_ready(conn: AsyncConnection, doc: Document, *, md5: str | None = None,
                         offset: float = 0.0) -> None:
    """``document.ready`` for ``doc``, in the transaction (on ``conn``) that made it ready.
    Every writer that makes a document ready calls this, and only such a writer."""
    await write(conn, [document_row(EventType.READY, doc, md5)], offset)


# -- the delivery side ----------------------------------------------------------------------
def _earlier_undelivered() -> ColumnElement[bool]:
    older = events.alias("older")
    return select(older.c.id).where(
        older.c.subject == events.c.subject, older.c.id < events.c.id,
        older.c.state != DELIVERED).exists()


#: events due now, unclaimed or whose claim lapsed, with no earlier undelivered event of
#: the same subject (a dead one blocks its subject until replayed: order before progress)
_due = select(events.c.id).where(
    events.c.state == PENDING, events.c.next_attempt_at <= NOW, events.c.lease_until <= NOW,
    ~_earlier_undelivered(),
).order_by(events.c.id).limit(bindparam("limit")).with_for_update(skip_locked=True)
_claim = update(events).where(
    events.c.id.in_(bindparam("ids", expanding=True)), events.c.state == PENDING,
    events.c.lease_until <= NOW,
).values(attempt=bindparam("token"), lease_until=LEASE).returning(*events.c)
_mine = and_(events.c.event_id == bindparam("e_id"), events.c.state == PENDING,
             events.c.attempt == bindparam("token"))
_delivered = update(events).where(_mine).values(
    state=DELIVERED, attempt=None, attempts=events.c.attempts + 1, delivered_at=NOW,
    lease_until=NOW, last_error=None)
_failed = update(events).where(_mine).values(
    attempts=events.c.attempts + 1, attempt=None, lease_until=NOW, next_attempt_at=LATER,
    last_error=bindparam("error"))
_dead = update(events).where(_mine).values(
    state=DEAD, attempts=events.c.attempts + 1, attempt=None, lease_until=NOW,
    last_error=bindparam("error"))
_log = insert(deliveries)
_replay = update(events).where(
    events.c.event_id == bindparam("e_id"), events.c.state.in_([DEAD, DELIVERED]),
).values(state=PENDING, attempts=0, attempt=None, next_attempt_at=NOW, lease_until=NOW,
         delivered_at=None)


@dataclass(frozen=True)
class Event:
    """An event as the delivery worker and ``blobledger events`` see it."""

    id: int
    event_id: str
    type: str
    subject: str
    payload: dict[str, Any]
    created_at: datetime
    state: str
    attempts: int
    next_attempt_at: datetime
    document_id: str | None = None
    blob_name: str | None = None
    version: int | None = None
    last_error: str | None = None
    delivered_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Any) -> Event:
        return cls(row.id, row.event_id, row.type, row.subject, json.loads(row.payload),
                   as_utc(row.created_at), row.state, row.attempts,
                   as_utc(row.next_attempt_at), row.document_id, row.blob_name, row.version,
                   row.last_error, as_utc(row.delivered_at) if row.delivered_at else None)

    def body(self) -> dict[str, Any]:
        """What is delivered (the Standard Webhooks payload shape): type, timestamp, data."""
        return {"type": self.type, "id": self.event_id,
                "timestamp": self.created_at.isoformat().replace("+00:00", "Z"),
                "data": self.payload}

    def to_json(self) -> dict[str, Any]:
        def stamp(value: datetime | None) -> str | None:
            return value.isoformat().replace("+00:00", "Z") if value else None

        return {"seq": self.id, "id": self.event_id, "type": self.type,
                "subject": self.subject, "state": self.state, "attempts": self.attempts,
                "created_at": stamp(self.created_at),
                "next_attempt_at": stamp(self.next_attempt_at),
                "delivered_at": stamp(self.delivered_at), "last_error": self.last_error,
                "data": self.payload}


@dataclass(frozen=True)
class Attempt:
    """One line of an event's attempt log."""

    attempt_no: int
    target: str
    started_at: datetime
    ended_at: datetime | None
    outcome: str
    status_code: int | None
    error: str | None

    def to_json(self) -> dict[str, Any]:
        return {"attempt": self.attempt_no, "target": self.target,
                "started_at": as_utc(self.started_at).isoformat().replace("+00:00", "Z"),
                "ended_at": (as_utc(self.ended_at).isoformat().replace("+00:00", "Z")
                             if self.ended_at else None),
                "outcome": self.outcome, "status_code": self.status_code,
                "error": self.error}


async def claim(conn: AsyncConnection, limit: int, lease: float,
                offset: float = 0.0) -> tuple[str, list[Event]]:
    """Claim up to ``limit`` due events (in ``id`` order, the first undelivered one of each
    subject only): a token of this claim, and the events it won."""
    token = claim_token()
    times = dict(now_s=offset, lease_s=offset + lease)
    ids = list((await conn.execute(_due, dict(times, limit=limit))).scalars())
    if not ids:
        return token, []
    won = (await conn.execute(_claim, dict(times, ids=ids, token=token))).all()
    return token, sorted((Event.from_row(row) for row in won), key=lambda e: e.id)


async def mark_delivered(conn: AsyncConnection, event_id: str, token: str,
                         offset: float = 0.0) -> bool:
    """``pending -> delivered``, only while the event is still claimed by ``token``."""
    result = await conn.execute(_delivered, dict(e_id=event_id, token=token, now_s=offset))
    return int(getattr(result, "rowcount", 0)) == 1


async def mark_failed(conn: AsyncConnection, event_id: str, token: str, error: str, *,
                      dead: bool, retry_in: float, offset: float = 0.0) -> bool:
    """A failed attempt: due again in ``retry_in`` seconds, or ``dead`` (no more tries);
    only while still claimed by ``token``."""
    statement = _dead if dead else _failed
    result = await conn.execute(statement, dict(
        e_id=event_id, token=token, error=error[:2000], now_s=offset,
        later_s=offset + retry_in))
    return int(getattr(result, "rowcount", 0)) == 1


async def log_attempt(conn: AsyncConnection, event_id: str, attempt_no: int, target: str,
                      claim_token: str, started_at: datetime, ended_at: datetime, *, ok: bool,
                      status_code: int | None = None, error: str | None = None) -> None:
    """One line of the attempt log (written whatever the claim's fate: it says what was
    sent), its times the worker's own (UTC)."""
    await conn.execute(_log, dict(
        event_id=event_id, attempt_no=attempt_no, target=target, claim=claim_token,
        started_at=_naive(started_at), ended_at=_naive(ended_at),
        outcome="ok" if ok else "failed", status_code=status_code,
        error=None if error is None else error[:2000]))


def _naive(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


async def succeeded_targets(conn: AsyncConnection, event_id: str) -> set[str]:
    """The targets that already took this event (skipped on a retry)."""
    return set((await conn.execute(select(deliveries.c.target).where(
        deliveries.c.event_id == event_id, deliveries.c.outcome == "ok"))).scalars())


async def replay(conn: AsyncConnection, event_id: str, offset: float = 0.0) -> bool:
    """A dead or delivered event back to ``pending``, due now, with its attempts reset
    (its log is kept, its successes marked ``replayed``: every target is sent it again)."""
    await conn.execute(update(deliveries).where(
        deliveries.c.event_id == event_id, deliveries.c.outcome == "ok",
        select(events.c.id).where(events.c.event_id == event_id,
                                  events.c.state.in_([DEAD, DELIVERED])).exists(),
    ).values(outcome=REPLAYED))
    result = await conn.execute(_replay, dict(e_id=event_id, now_s=offset))
    return int(getattr(result, "rowcount", 0)) == 1


async def find(conn: AsyncConnection, event_id: str) -> tuple[Event, list[Attempt]] | None:
    """An event and its attempt log (None if there is no such event)."""
    row = (await conn.execute(select(events).where(
        events.c.event_id == event_id))).one_or_none()
    if row is None:
        return None
    log = (await conn.execute(select(deliveries).where(
        deliveries.c.event_id == event_id).order_by(deliveries.c.id))).all()
    return Event.from_row(row), [
        Attempt(r.attempt_no, r.target, r.started_at, r.ended_at, r.outcome, r.status_code,
                r.error) for r in log]


async def listing(conn: AsyncConnection, *, state: str | None = None, type: str | None = None,
                  subject: str | None = None, limit: int = 100,
                  newest: bool = False) -> list[Event]:
    """Events in order (``newest``: the latest first), filtered by state, type and subject
    (a document's id or an attachment's blob name)."""
    query = select(events).order_by(events.c.id.desc() if newest else events.c.id).limit(limit)
    if state:
        query = query.where(events.c.state == state)
    if type:
        query = query.where(events.c.type == type)
    if subject:
        query = query.where(events.c.subject == subject)
    return [Event.from_row(row) for row in (await conn.execute(query)).all()]


async def oldest_pending(conn: AsyncConnection, offset: float = 0.0) -> float | None:
    """How many seconds the oldest pending event has waited (None: none pending)."""
    oldest = (await conn.execute(select(events.c.created_at).where(
        events.c.state == PENDING).order_by(events.c.id).limit(1))).scalar_one_or_none()
    if oldest is None:
        return None
    now = (await conn.execute(select(NOW), dict(now_s=offset))).scalar_one()
    now = now if isinstance(now, datetime) else datetime.fromisoformat(str(now))
    return max(0.0, (as_utc(now) - as_utc(oldest)).total_seconds())


async def counts(conn: AsyncConnection) -> dict[str, int]:
    """How many events are in each state."""
    from sqlalchemy import func

    rows = (await conn.execute(select(events.c.state, func.count()).group_by(
        events.c.state))).all()
    found = {state: 0 for state in (PENDING, DELIVERED, DEAD)}
    found.update({state: int(count) for state, count in rows})
    return found
