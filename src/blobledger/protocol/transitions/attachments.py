"""A1 on the application's connection, A4 and the detach steps: plain functions on the
*application's* connection, so that they commit or roll back with the application's own
write (they never open a transaction of their own); and the ledger's own attachment steps
(A1, the confirm before A3, an attachment's row)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, bindparam, or_, select, update

from blobledger.errors import AttachLost, Digests, InvalidInput
from blobledger.protocol import events
from blobledger.protocol.models import BlobKind, EventType
from blobledger.protocol.owners import Owner
from blobledger.protocol.transitions.base import Steps
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import (
    ATTACHED,
    DELETING,
    NOW,
    _attach,
    _confirm_staged,
    _count,
    _insert_blob,
    _owned,
    _rows,
    blobs,
)


def begin_stage_in(conn: Any, intent: Intent, filename: str | None,
                   times: dict[str, float]) -> None:
    """A1 on the application's connection, inside its transaction (SQLite, whose one writer
    is that transaction: Django's integration): the same row as :meth:`Transitions.begin_stage`,
    which commits or rolls back with the application's own writes. ``times`` from
    :meth:`Transitions.times` with the upload deadline as the lease."""
    conn.execute(_insert_blob, {**_staged_row(intent, filename), **times})


def confirm_staged_in(conn: Any, intent: Intent, digests: Digests,
                      times: dict[str, float]) -> bool:
    """The confirm before A3, on the application's connection (see :func:`begin_stage_in`):
    size and checksums recorded while the row is still this attempt's."""
    return _count(conn.execute(_confirm_staged, {**_staged_digests(intent, digests),
                                                 **times})) == 1


def _staged_row(intent: Intent, filename: str | None) -> dict[str, Any]:
    return dict(name=intent.blob_name, document_id=None, kind=BlobKind.ATTACHMENT.value,
                content_type=intent.content_type, attempt=intent.attempt, filename=filename)


def _staged_digests(intent: Intent, digests: Digests) -> dict[str, Any]:
    return dict(b_name=intent.blob_name, b_attempt=intent.attempt, b_size=digests.size,
                b_sha256=digests.sha256, b_md5=digests.md5)


def attach(conn: Any, blob_name: str, attempt: str, owner: Owner, offset: float = 0.0) -> bool:
    """A4 on the application's connection, inside its transaction: the staged blob row
    ``pending -> attached`` by compare-and-set on its name, state and staging token, recording
    the owner. False if it lost (a sweeper fenced the staged blob: the caller must fail its
    transaction). Writes ``attachment.attached`` with it. Never commits."""
    rows = _rows(conn.execute(_attach, dict(
        b_name=blob_name, b_attempt=attempt, o_table=owner.table, o_key=owner.key,
        o_column=owner.column, now_s=offset)))
    events.write_sync(conn, [events.attachment_row(EventType.ATTACHED, row, owner)
                             for row in rows], offset)
    return len(rows) == 1


def detach_replaced(conn: Any, owner: Owner, keep: Sequence[str], offset: float = 0.0) -> int:
    """Detach or replace, on the application's connection: every blob attached to the owner's
    column that the column no longer holds goes ``attached -> deleting`` (the outbox), in the
    same transaction as the owner's update, each with its ``attachment.detached``. The
    number moved."""
    query = update(blobs).where(*_owned, blobs.c.owner_column == bindparam("o_column"))
    if keep:
        query = query.where(blobs.c.name.not_in(list(keep)))
    rows = _rows(conn.execute(
        query.values(state=DELETING, changed_at=NOW, lease_until=NOW)
        .returning(*events.attachment_columns(blobs)),
        dict(o_table=owner.table, o_key=owner.key, o_column=owner.column, now_s=offset)))
    events.write_sync(conn, [events.attachment_row(EventType.DETACHED, row, owner)
                             for row in sorted(rows)], offset)
    return len(rows)


def detach_owner(conn: Any, table: str, key: str, offset: float = 0.0) -> int:
    """The owner row is deleted: every blob attached to it goes ``attached -> deleting``, in
    the transaction that deletes it, each with its ``attachment.detached``. The number
    moved."""
    rows = _rows(conn.execute(
        update(blobs).where(*_owned).values(state=DELETING, changed_at=NOW, lease_until=NOW)
        .returning(*events.attachment_columns(blobs), blobs.c.owner_column),
        dict(o_table=table, o_key=key, now_s=offset)))
    events.write_sync(conn, [
        events.attachment_row(EventType.DETACHED, row[:-1], Owner(table, key, row[-1]))
        for row in sorted(rows)], offset)
    return len(rows)


def attached_to(conn: Any, owner: Owner, names: Sequence[str]) -> set[str]:
    """Which of ``names`` are attached to the owner's column (on the application's
    connection, inside its transaction)."""
    if not names:
        return set()
    return set(conn.execute(select(blobs.c.name).where(
        blobs.c.name.in_(list(names)), blobs.c.state == ATTACHED,
        blobs.c.owner_table == owner.table, blobs.c.owner_key == owner.key,
        blobs.c.owner_column == owner.column)).scalars())


def column_blobs(conn: Any, owner: Owner, name: str) -> dict[str, str]:
    """The blobs attached to the owner's column, and ``name`` if its row was ever this
    column's (``deleting``: detached), each with its state, on the application's
    connection: what an integration compares with the value it is about to write back
    unchanged (a stale instance's), inside the same transaction, after its UPDATE of the
    owner row (whose lock fences every other save and delete of that row)."""
    rows = conn.execute(select(blobs.c.name, blobs.c.state).where(
        blobs.c.owner_table == owner.table, blobs.c.owner_key == owner.key,
        blobs.c.owner_column == owner.column,
        or_(blobs.c.state == ATTACHED, blobs.c.name == name))).all()
    return {str(row[0]): str(row[1]) for row in rows}


def sync_owner_column(conn: Any, owner: Owner, items: Sequence[tuple[str, str | None]],
                      offset: float = 0.0, *, new: bool = False) -> None:
    """Make the blob rows agree with one owner column's new value, on ``conn`` (inside the
    application's transaction). ``items`` are the blobs the column now holds, each with the
    token that staged it (``None`` for a blob attached before): A4 for each staged one, a
    check that every other one is already this column's, then the detach of whatever the
    column no longer holds (nothing to detach on a ``new`` owner row). AttachLost if a
    staged blob can no longer be attached, InvalidInput if a blob belongs elsewhere."""
    names = [name for name, _ in items]
    if len(set(names)) != len(names):
        raise InvalidInput("an attachment appears twice in one column")
    held = [name for name, attempt in items
            if not (attempt and attach(conn, name, attempt, owner, offset))]
    missing = set(held) - attached_to(conn, owner, held)
    for name, attempt in items:
        if name not in missing:
            continue
        if attempt is not None:
            raise AttachLost(
                f"staged blob {name} can no longer be attached (the sweeper fenced it "
                "or another owner holds it): stage the bytes again")
        raise InvalidInput(f"attachment {name} is not attached to {owner.table} "
                           f"{owner.key}.{owner.column}: stage the bytes for a new owner")
    if not new:
        detach_replaced(conn, owner, names, offset)



class AttachmentSteps(Steps):
    """A1 and the step before A3 (``Ledger.stage``), and an attachment's row."""

    async def begin_stage(self, intent: Intent, filename: str | None) -> None:
        """A1: a pending attachment row owned by no document, this attempt's and leased."""
        async with self.db.transaction() as conn:
            await conn.execute(_insert_blob, {
                **_staged_row(intent, filename),
                **self.times(lease=self.settings.upload_deadline)})

    async def confirm_staged(self, intent: Intent, digests: Digests) -> bool:
        """Before A3: the staged intent is still this attempt's; its lease extended and its
        size and checksums recorded (A4 and the checks read them). False if lost."""
        async with self.db.transaction() as conn:
            return _count(await conn.execute(_confirm_staged, {
                **_staged_digests(intent, digests),
                **self.times(lease=self.settings.upload_deadline)})) == 1

    async def staged_blob(self, blob_name: str) -> Row[Any] | None:
        """An attachment's row in any state (None if there is none: never staged, or swept
        and deleted)."""
        async with self.db.transaction(readonly=True) as conn:
            return (await conn.execute(select(blobs).where(
                blobs.c.name == blob_name,
                blobs.c.kind == BlobKind.ATTACHMENT.value))).one_or_none()

    async def attachment(self, blob_name: str) -> Row[Any] | None:
        """An attached blob's row (None if it is not attached)."""
        async with self.db.transaction(readonly=True) as conn:
            return (await conn.execute(select(blobs).where(
                blobs.c.name == blob_name, blobs.c.state == ATTACHED))).one_or_none()
