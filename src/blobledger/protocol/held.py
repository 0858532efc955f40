"""Held documents: every change to ``processing``, and the moves out of ``held``.

A creation that is held (asked by its writer, or by the settings' hold policy) becomes
``held`` at C4 instead of ``ready``, with one pending work row per configured processor, in
C4's transaction (:meth:`Transitions.commit_create`, :meth:`Transitions.roll_forward`). A
held document is committed and stored, and invisible to every reader (they read ``ready``
documents only). The processing worker (:mod:`blobledger.workers.processing`) then, for each
work row:

- :meth:`Held.claim`: the row's owner token and lease replaced by its own, only once the
  lease of any previous claim has expired (on PostgreSQL ``FOR UPDATE SKIP LOCKED``);
- runs the processor on the document's bytes;
- :meth:`Held.accept` or :meth:`Held.reject` (or :meth:`Held.failed`: the run errored and is
  tried again later), each a compare-and-set on the row's state and the claim's token:
  a worker whose lease lapsed while it was paused, and whose row another worker claimed,
  loses and records nothing. Each first locks the document's row, so the verdicts of one
  document are recorded one after the other.

The verdict that leaves no processor pending and none rejected moves the document
``held -> ready`` in the same transaction (compare-and-set on its status and version):
:func:`_became_ready` is called there, the one place a held document becomes ready. A
rejection deletes the document's row, hands its blob to the deletion path (``committed
-> deleting``; the sweeper deletes it after the grace) and writes ``document.rejected``
(:func:`blobledger.protocol.events.document_rejected`), in one transaction, and keeps the
rejected work row (its owner, name and reason) for the writer to read until the idempotency
retention has passed (:meth:`Held.purge`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, update

from blobledger.protocol import events
from blobledger.protocol.documents import Document
from blobledger.protocol.models import DocumentStatus, KeyState, WorkState, as_utc
from blobledger.protocol.transitions import Transitions
from blobledger.protocol.transitions.statements import (
    CUTOFF,
    LEASE,
    NOW,
    _count,
    _to_deleting,
    claim_token,
    documents,
    keys,
    processing,
)
from blobledger.protocol.variant_owner import detach_variants

HELD = DocumentStatus.HELD.value
PENDING, ACCEPTED, REJECTED = (s.value for s in WorkState)
#: reasons are kept short: what a writer reads, not a log
REASON_MAX = 2000


@dataclass(frozen=True)
class Work:
    """One claimed work row: a processor to run on a held document's version."""

    document_id: str
    version: int
    processor: str
    attempts: int  # this run included


@dataclass(frozen=True)
class HoldState:
    """What the writer of a held or rejected document is told: ``status`` (``held`` or
    ``rejected``), the ``reason`` of a rejection, and each processor's state."""

    document_id: str
    name: str
    version: int
    status: str
    owner: str | None
    reason: str | None = None
    processors: dict[str, str] = field(default_factory=dict)
    #: a held document as it will read once ready (None once it was rejected)
    document: Document | None = None

    def to_json(self) -> dict[str, Any]:
        found = self.document.to_json() if self.document is not None else {
            "id": self.document_id, "name": self.name, "version": self.version}
        return {**found, "status": self.status, "reason": self.reason,
                "processors": dict(self.processors)}


async def _became_ready(conn: Any, doc: Document, md5: str | None, offset: float) -> None:
    """The place a held document becomes ready, inside the transaction that moves it
    ``held -> ready``: the ``document.ready`` event of a held creation is written here (and
    not by C4, which made it held)."""
    await events.document_ready(conn, doc, md5=md5, offset=offset)


def _utc(value: Any) -> datetime:
    """A stored time (a datetime, or SQLite's text) as an aware UTC datetime."""
    return as_utc(value if isinstance(value, datetime) else datetime.fromisoformat(str(value)))


_mine = (processing.c.document_id == bindparam("w_doc"),
         processing.c.version == bindparam("w_version"),
         processing.c.processor == bindparam("w_processor"),
         processing.c.state == PENDING, processing.c.attempt == bindparam("w_token"))
_lock_held = select(documents.c.id).where(
    documents.c.id == bindparam("w_doc"), documents.c.status == HELD,
    documents.c.version == bindparam("w_version")).with_for_update()  # PostgreSQL only
_verdict = update(processing).where(*_mine).values(
    state=bindparam("w_state"), reason=bindparam("w_reason"), attempt=None, changed_at=NOW,
    lease_until=NOW)
_undecided = select(func.count()).select_from(processing).where(
    processing.c.document_id == bindparam("w_doc"),
    processing.c.version == bindparam("w_version"), processing.c.state != ACCEPTED)
_to_ready = update(documents).where(
    documents.c.id == bindparam("w_doc"), documents.c.status == HELD,
    documents.c.version == bindparam("w_version"),
).values(status=DocumentStatus.READY.value, updated_at=NOW).returning(*documents.c)
_drop_held = delete(documents).where(
    documents.c.id == bindparam("w_doc"), documents.c.status == HELD,
    documents.c.version == bindparam("w_version")).returning(*documents.c)
_drop_mine = delete(processing).where(*_mine)


async def _record_verdict(conn: Any, params: dict[str, Any]) -> str | None:
    """The first step of a verdict, in its transaction: the held document's row locked (so
    the verdicts of one document are recorded one after the other), then the work row's
    verdict by compare-and-set on the claim's token. ``gone`` (the document is not held at
    that version any more: the work row dropped, while still this claim's), ``lost`` (the
    claim is not this token's any more), or None: recorded, go on."""
    if (await conn.execute(_lock_held, params)).first() is None:
        await conn.execute(_drop_mine, params)
        return "gone"
    if _count(await conn.execute(_verdict, params)) != 1:
        return "lost"
    return None


class Held:
    """The processing transitions, on one ledger's database and settings."""

    def __init__(self, transitions: Transitions) -> None:
        self.transitions = transitions

    @property
    def db(self) -> Any:
        return self.transitions.db

    def _params(self, token: str, work: Work, **extra: Any) -> dict[str, Any]:
        return {"w_doc": work.document_id, "w_version": work.version,
                "w_processor": work.processor, "w_token": token,
                **self.transitions.times(), **extra}

    async def claim(self, processors: tuple[str, ...], limit: int,
                    lease: float) -> tuple[str, list[Work]]:
        """Pending work of these processors whose lease has expired, up to ``limit``: the
        claim's token and the rows it won (attempts counted)."""
        token = claim_token()
        if not processors:
            return token, []
        times = self.transitions.times(lease=lease)
        query = (select(processing.c.document_id, processing.c.version,
                        processing.c.processor)
                 .where(processing.c.state == PENDING, processing.c.lease_until <= NOW,
                        processing.c.processor.in_(list(processors)))
                 .order_by(processing.c.created_at).limit(limit)
                 .with_for_update(skip_locked=True))
        won: list[Work] = []
        async with self.db.transaction() as conn:
            for doc_id, version, processor in (await conn.execute(query, times)).all():
                row = (await conn.execute(
                    update(processing).where(
                        processing.c.document_id == doc_id, processing.c.version == version,
                        processing.c.processor == processor,
                        processing.c.state == PENDING, processing.c.lease_until <= NOW)
                    .values(attempt=token, lease_until=LEASE,
                            attempts=processing.c.attempts + 1)
                    .returning(processing.c.attempts), times)).one_or_none()
                if row is not None:
                    won.append(Work(doc_id, version, processor, row.attempts))
        return token, won

    async def document(self, work: Work) -> Document | None:
        """The held document the work is for, at its version (None: it is not held at that
        version any more: rejected by another processor, or already settled)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(documents).where(
                documents.c.id == work.document_id, documents.c.status == HELD,
                documents.c.version == work.version))).one_or_none()
        return None if row is None else Document.from_row(row)

    async def accept(self, token: str, work: Work) -> str:
        """The processor accepted: ``ready`` (the last verdict: the document is ready now),
        ``accepted`` (others still pending), ``gone`` (the document is not held any more)
        or ``lost`` (the claim is not this token's any more)."""
        params = self._params(token, work, w_state=ACCEPTED, w_reason=None)
        async with self.db.transaction() as conn:
            if (refused := await _record_verdict(conn, params)) is not None:
                return refused
            if int((await conn.execute(_undecided, params)).scalar_one()) > 0:
                return "accepted"
            row = (await conn.execute(_to_ready, params)).one()
            doc = Document.from_row(row)
            await _became_ready(conn, doc, row.md5, self.transitions.offset)
            await conn.execute(delete(processing).where(
                processing.c.document_id == work.document_id,
                processing.c.version == work.version))
            await conn.execute(update(keys).where(
                keys.c.blob_name == doc.blob, keys.c.state == KeyState.DONE.value,
            ).values(response=json.dumps(doc.to_json())))
        return "ready"

    async def reject(self, token: str, work: Work, reason: str) -> str:
        """The processor rejected: ``rejected`` (the document's row deleted, its blob to the
        deletion path, the reason kept), ``gone`` or ``lost`` as :meth:`accept`."""
        params = self._params(token, work, w_state=REJECTED, w_reason=reason[:REASON_MAX])
        async with self.db.transaction() as conn:
            if (refused := await _record_verdict(conn, params)) is not None:
                return refused
            row = (await conn.execute(_drop_held, params)).one()
            blob = row.blob_name
            await conn.execute(_to_deleting, dict(params, b_name=blob))
            await events.document_rejected(conn, Document.from_row(row), md5=row.md5,
                                           processor=work.processor,
                                           reason=reason[:REASON_MAX],
                                           offset=self.transitions.offset)
            # variants made of it meanwhile (eagerly, by a processor) go with it
            await detach_variants(conn, work.document_id, work.version, params)
            await conn.execute(delete(processing).where(
                processing.c.document_id == work.document_id,
                processing.c.version == work.version, processing.c.state != REJECTED))
            # a retry under the creation's idempotency key is told the document is gone
            await conn.execute(update(keys).where(
                keys.c.blob_name == blob, keys.c.state == KeyState.DONE.value,
            ).values(response=None))
        return "rejected"

    async def drop(self, token: str, work: Work) -> bool:
        """Work for a document no longer held at its version (decided meanwhile): the row,
        while still this claim's. False if it was not."""
        async with self.db.transaction() as conn:
            return _count(await conn.execute(_drop_mine, self._params(token, work))) == 1

    async def failed(self, token: str, work: Work, reason: str, retry_in: float) -> bool:
        """The run failed (an error, a timeout): the claim released, the row tried again in
        ``retry_in`` seconds, the error kept as its reason. False if the claim was lost."""
        params = self._params(token, work, w_reason=f"error: {reason}"[:REASON_MAX],
                              **self.transitions.times(lease=retry_in))
        async with self.db.transaction() as conn:
            return _count(await conn.execute(update(processing).where(*_mine).values(
                attempt=None, lease_until=LEASE, reason=bindparam("w_reason"),
                changed_at=NOW), params)) == 1

    async def state(self, doc_id: str) -> HoldState | None:
        """A held or rejected document's state (None: neither; a ready or unknown id)."""
        async with self.db.transaction(readonly=True) as conn:
            doc = (await conn.execute(select(documents).where(
                documents.c.id == doc_id, documents.c.status == HELD))).one_or_none()
            rows = (await conn.execute(_verdicts([doc_id]))).all()
        return _hold_state(doc_id, doc, rows)

    async def of_owner(self, owner: str, limit: int = 50) -> list[HoldState]:
        """One writer's held documents (newest first), then its rejected ones (most recently
        rejected first), up to ``limit`` of each: what the page shows that writer."""
        async with self.db.transaction(readonly=True) as conn:
            held = {row.id: row for row in (await conn.execute(
                select(documents).where(documents.c.status == HELD, documents.c.owner == owner)
                .order_by(documents.c.updated_at.desc(), documents.c.id).limit(limit))).all()}
            rejected = list((await conn.execute(
                select(processing.c.document_id).where(
                    processing.c.state == REJECTED, processing.c.owner == owner)
                .group_by(processing.c.document_id)
                .order_by(func.max(processing.c.changed_at).desc(), processing.c.document_id)
                .limit(limit))).scalars())
            ids = [*held, *(doc_id for doc_id in rejected if doc_id not in held)]
            rows = (await conn.execute(_verdicts(ids))).all() if ids else []
        found = (_hold_state(doc_id, held.get(doc_id),
                             [r for r in rows if r.document_id == doc_id]) for doc_id in ids)
        return [state for state in found if state is not None]

    async def waiting(self) -> tuple[int, float | None]:
        """How many documents are held, and how many seconds the oldest has waited since
        C4 made it held (None: none is held)."""
        async with self.db.transaction(readonly=True) as conn:
            count, oldest = (await conn.execute(select(
                func.count(), func.min(documents.c.updated_at)).where(
                documents.c.status == HELD))).one()
            if not count or oldest is None:
                return 0, None
            now = (await conn.execute(select(NOW), self.transitions.times())).scalar_one()
        return int(count), max(0.0, (_utc(now) - _utc(oldest)).total_seconds())

    async def purge(self, retention: float) -> int:
        """Rejected work rows older than ``retention``: their writers are told no more."""
        async with self.db.transaction() as conn:
            return _count(await conn.execute(delete(processing).where(
                processing.c.state == REJECTED, processing.c.changed_at < CUTOFF),
                self.transitions.times(cutoff=retention)))


def _verdicts(doc_ids: list[str]) -> Any:
    """The work rows of these documents, newest version first, by processor."""
    return select(
        processing.c.document_id, processing.c.processor, processing.c.state,
        processing.c.reason, processing.c.owner, processing.c.name, processing.c.version,
    ).where(processing.c.document_id.in_(doc_ids)).order_by(
        processing.c.document_id, processing.c.version.desc(), processing.c.processor)


def _hold_state(doc_id: str, doc: Any, rows: list[Any]) -> HoldState | None:
    """A document's :class:`HoldState` from its row (None once it is not held) and its work
    rows (:func:`_verdicts`)."""
    verdicts = {r.processor: r.state for r in rows}
    if doc is not None:
        return HoldState(doc_id, doc.name, doc.version, HELD, doc.owner,
                         processors=verdicts, document=Document.from_row(doc))
    rejected = next((r for r in rows if r.state == REJECTED), None)
    if rejected is None:
        return None
    return HoldState(doc_id, rejected.name, rejected.version, REJECTED, rejected.owner,
                     reason=rejected.reason, processors=verdicts)
