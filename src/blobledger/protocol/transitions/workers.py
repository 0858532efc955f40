"""The workers' steps (``Sweeper``, the retag worker): claims, the deletion path's
hand-over and removal, the roll-forward, the deferred retag's claims and marks, the
idempotency keys' purge."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, delete, func, select, update

from blobledger.errors import Digests
from blobledger.protocol import events
from blobledger.protocol.documents import Document
from blobledger.protocol.models import BlobKind, BlobState, DocumentStatus, KeyState, UploadState
from blobledger.protocol.owners import Owner, owner_holds
from blobledger.protocol.transitions.base import Steps
from blobledger.protocol.transitions.statements import (
    ATTACHED,
    COMMITTED,
    CUTOFF,
    DELETING,
    LEASE,
    NOW,
    PENDING,
    _as_datetime,
    _commit_blob,
    _count,
    _key_done,
    _ready_document,
    _to_deleting,
    blobs,
    claim_token,
    documents,
    keys,
    uploads,
)


class WorkerSteps(Steps):
    """A worker's claims and marks, each a compare-and-set on its claim's token."""

    # -- workers --------------------------------------------------------------------------
    async def claim(self, state: BlobState, age: float, limit: int,
                    lease: float) -> tuple[str, list[Row[Any]]]:
        """Rows in ``state`` older than ``age`` whose lease has expired, up to ``limit``: the
        claim's token and the rows it won (name, document_id, kind)."""
        token = claim_token()
        times = self.times(lease=lease, cutoff=age)
        query = (select(blobs.c.name).where(
            blobs.c.state == state.value, blobs.c.changed_at < CUTOFF,
            blobs.c.lease_until < NOW).order_by(blobs.c.changed_at).limit(limit)
            .with_for_update(skip_locked=True))  # rendered on PostgreSQL only
        async with self.db.transaction() as conn:
            names = list((await conn.execute(query, times)).scalars())
            if not names:
                return token, []
            won = (await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == state.value,
                       blobs.c.lease_until < NOW)
                .values(attempt=token, lease_until=LEASE)
                .returning(blobs.c.name, blobs.c.document_id, blobs.c.kind),
                times)).all()
        order = {name: i for i, name in enumerate(names)}
        return token, sorted(won, key=lambda r: order[r.name])

    async def remove_swept(self, token: str, names: Sequence[str]) -> list[str]:
        """Stale intents whose blob is gone: their rows (a creation's pending document and
        key too), only while the claim is still ``token``'s. The names removed."""
        async with self.db.transaction() as conn:
            removed = (await conn.execute(
                delete(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == PENDING,
                       blobs.c.attempt == token)
                .returning(blobs.c.name, blobs.c.document_id, blobs.c.kind))).all()
            await _drop_intents(conn, removed)
        return [row.name for row in removed]

    async def fence_swept(self, token: str, names: Sequence[str], *,
                          keep_claim: bool = True) -> list[str]:
        """Claimed stale intents the sweeper decided to delete (their blob absent or tagged
        ``pending``), on a store whose delete cannot see the tag: ``pending -> deleting``
        under the claim's token (kept, so :meth:`remove_deleted` can finish them), with a
        creation's pending document, the pending key and the upload row, before any delete
        is sent. ``deleting`` is final: no writer, retry or sweeper can commit these blobs
        afterwards, however long this sweeper sleeps. Without ``keep_claim`` the rows are
        handed to the deletion path at once (no owner, lease over). The names moved."""
        release = {} if keep_claim else {"attempt": None, "lease_until": NOW}
        async with self.db.transaction() as conn:
            moved = (await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == PENDING,
                       blobs.c.attempt == token)
                .values(state=DELETING, changed_at=NOW, **release)
                .returning(blobs.c.name, blobs.c.document_id, blobs.c.kind),
                self.times())).all()
            await _drop_intents(conn, moved)
        return [r.name for r in moved]

    async def roll_forward(self, token: str, name: str, digests: Digests) -> str:
        """C4 on behalf of a creation whose writer stopped after C3: ``ready``, ``deleting``
        (no pending document points at it any more) or ``lost`` (the claim is not ours)."""
        params = dict(b_name=name, b_attempt=token, b_size=digests.size,
                      b_sha256=digests.sha256, b_md5=digests.md5, **self._settle(),
                      **self.times(expires=self.settings.idempotency_retention))
        async with self.db.transaction() as conn:
            if _count(await conn.execute(_commit_blob, params)) != 1:
                return "lost"
            doc_id = (await conn.execute(select(blobs.c.document_id).where(
                blobs.c.name == name))).scalar_one()
            row = (await conn.execute(_ready_document, dict(params, d_id=doc_id))).one_or_none()
            if row is None:
                await conn.execute(_to_deleting, params)
                return "deleting"
            await self._hold(conn, row)
            doc = Document.from_row(row)
            if doc.status == DocumentStatus.READY:  # a held one's is written at its acceptance
                await events.document_ready(conn, doc, md5=digests.md5, offset=self.offset)
            await conn.execute(_key_done, dict(
                params, k_name=doc.name, k_response=json.dumps(doc.to_json())))
            await conn.execute(update(uploads).where(uploads.c.blob_name == name).values(
                state=UploadState.DONE.value, changed_at=NOW), params)
        return "ready"

    async def hand_to_deletion(self, token: str, names: Sequence[str]) -> int:
        """Claimed pending rows that no document or owner will point at (a replacement whose
        writer stopped after R3; a stale staged attachment, fenced before any storage call so
        that a late A4 loses): to ``deleting``."""
        async with self.db.transaction() as conn:
            moved = await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == PENDING,
                       blobs.c.attempt == token)
                .values(state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW),
                self.times())
            await conn.execute(delete(uploads).where(uploads.c.blob_name.in_(names)))
        return _count(moved)

    async def discard_unverified(self, token: str, names: Sequence[str]) -> int:
        """Claimed upload intents whose blob is tagged committed although the service never
        verified its bytes (a direct-upload client tagged it itself): to ``deleting``, with
        their pending documents and upload rows, never to ``ready``."""
        async with self.db.transaction() as conn:
            moved = (await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == PENDING,
                       blobs.c.attempt == token)
                .values(state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW)
                .returning(blobs.c.name), self.times())).scalars().all()
            if moved:
                await conn.execute(delete(documents).where(
                    documents.c.blob_name.in_(moved),
                    documents.c.status == DocumentStatus.PENDING.value))
                await conn.execute(delete(uploads).where(uploads.c.blob_name.in_(moved)))
        return len(moved)

    async def pointed_at(self, names: Sequence[str]) -> set[str]:
        """Which of these blobs a document points at, are ``attached``, or are still held by
        the owner column their row names (the deletion path's guard)."""
        async with self.db.transaction(readonly=True) as conn:
            found = set((await conn.execute(select(documents.c.blob_name).where(
                documents.c.blob_name.in_(names)))).scalars())
            owned = (await conn.execute(select(
                blobs.c.name, blobs.c.state, blobs.c.owner_table, blobs.c.owner_key,
                blobs.c.owner_column).where(blobs.c.name.in_(names),
                                            blobs.c.owner_table.is_not(None)))).all()
            for row in owned:
                if row.state == ATTACHED:
                    found.add(row.name)
                    continue
                owner = Owner(row.owner_table, row.owner_key, row.owner_column)
                if await conn.run_sync(owner_holds, owner, row.name):
                    found.add(row.name)
        return found

    async def remove_deleted(self, token: str, names: Sequence[str]) -> list[str]:
        """The deletion path's last step: rows whose blob is gone, while still claimed.
        The names removed."""
        async with self.db.transaction() as conn:
            removed = (await conn.execute(delete(blobs).where(
                blobs.c.name.in_(names), blobs.c.state == DELETING, blobs.c.attempt == token)
                .returning(blobs.c.name))).all()
        return [row.name for row in removed]

    async def claim_retags(self, limit: int, lease: float) -> tuple[str, list[str]]:
        """Committed rows whose retag is owed and whose lease (a retag worker's earlier
        claim) has run out, oldest first, up to ``limit``: the claim's token and the names it
        won. A claim on a committed row holds off other retag workers only: replace and
        delete move the row on its state alone (and clear the claim)."""
        token = claim_token()
        times = self.times(lease=lease)
        query = (select(blobs.c.name).where(
            blobs.c.retag_due.is_not(None), blobs.c.state == COMMITTED,
            blobs.c.lease_until < NOW).order_by(blobs.c.retag_due).limit(limit)
            .with_for_update(skip_locked=True))  # rendered on PostgreSQL only
        async with self.db.transaction() as conn:
            names = list((await conn.execute(query, times)).scalars())
            if not names:
                return token, []
            won = (await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == COMMITTED,
                       blobs.c.retag_due.is_not(None), blobs.c.lease_until < NOW)
                .values(attempt=token, lease_until=LEASE)
                .returning(blobs.c.name), times)).scalars().all()
        order = {name: i for i, name in enumerate(names)}
        return token, sorted(won, key=lambda n: order[n])

    async def record_retagged(self, token: str, names: Sequence[str]) -> list[str]:
        """The retag done: the owed marker and the claim cleared, only on rows still
        ``committed`` under this claim's token (a row that moved to ``deleting``, or that
        another worker claimed after this one's lease ran out, is not touched). The names
        recorded."""
        if not names:
            return []
        async with self.db.transaction() as conn:
            return list((await conn.execute(
                update(blobs)
                .where(blobs.c.name.in_(names), blobs.c.state == COMMITTED,
                       blobs.c.attempt == token)
                .values(retag_due=None, attempt=None, lease_until=NOW)
                .returning(blobs.c.name), self.times())).scalars().all())

    async def retag_lag(self) -> float:
        """Seconds since the oldest retag still owed was recorded (0: none owed), on the
        database's clock."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(NOW, func.min(blobs.c.retag_due)).where(
                blobs.c.retag_due.is_not(None), blobs.c.state == COMMITTED),
                self.times())).one()
        if row[1] is None:
            return 0.0
        return max(0.0, (_as_datetime(row[0]) - _as_datetime(row[1])).total_seconds())

    async def purge_keys(self) -> int:
        """Idempotency keys past their retention."""
        async with self.db.transaction() as conn:
            purged = await conn.execute(delete(keys).where(
                keys.c.state == KeyState.DONE.value, keys.c.expires_at <= NOW), self.times())
        return _count(purged)


async def _drop_intents(conn: Any, rows: Sequence[Any]) -> None:
    """What goes with stale intents that were removed or fenced (rows of name, document_id,
    kind): a creation's pending document (while it still points at the blob), the pending
    idempotency keys and the upload rows."""
    if not rows:
        return
    creations = [(r.name, r.document_id) for r in rows if r.kind == BlobKind.CREATE]
    if creations:
        await conn.execute(delete(documents).where(
            documents.c.id.in_([doc for _, doc in creations]),
            documents.c.blob_name.in_([name for name, _ in creations]),
            documents.c.status == DocumentStatus.PENDING.value))
    names = [r.name for r in rows]
    await conn.execute(delete(keys).where(
        keys.c.blob_name.in_(names), keys.c.state == KeyState.PENDING.value))
    await conn.execute(delete(uploads).where(uploads.c.blob_name.in_(names)))

