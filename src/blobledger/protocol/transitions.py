"""Every change to ``documents``, ``blobs`` and ``idempotency_keys``: named, guarded steps.

Each transition is a compare-and-set on what its actor last saw: a blob row's state and
owner token (``attempt``: an upload attempt's, or a sweeper's claim), a document's status,
blob and version. Each says whether it won; an actor that lost does nothing further. Nothing
else in blobledger writes these tables. Times are the database's (:mod:`blobledger.protocol.clock`).
C4 (and the roll-forward), R4, delete, A4 and the detach steps write their event
(:mod:`blobledger.protocol.events`) in their own transaction; no other step writes one.

Writers (``Ledger``): C1 :meth:`begin_create`, :meth:`take_over` (a retry resumes a dead
attempt's intent), :meth:`confirm` (before C3/R3: the intent is still this attempt's, its
lease extended; a placeholder name is replaced here), C4 :meth:`commit_create`, R1
:meth:`begin_replace`, R4 :meth:`commit_replace`, :meth:`delete_document` (both also detach
the ended version's variants, :func:`~blobledger.protocol.variant_owner.detach_variants`), and
:meth:`abandon` (a live writer's failure path: its intent to the deletion path).

Attachments (``Ledger.stage`` and :mod:`blobledger.sqlalchemy`): A1 :meth:`begin_stage`,
:meth:`confirm_staged` (before A3, recording the digests); A4 :func:`attach` and the detach
steps :func:`detach_replaced` and :func:`detach_owner` (with :func:`sync_owner_column`, what
an integration calls for one owner column) are plain functions on the
*application's* connection, so that they commit or roll back with the application's own
write (they never open a transaction of their own).

Resumable uploads (``Resumable``): :meth:`begin_upload` (C1 with the upload's row, the
intent leased until the upload expires), :meth:`record_parts` (the durable offset, advanced
by compare-and-set on the offset seen and the owner token), :meth:`confirm_received`
(``serve`` stored a direct upload's bytes). They go through ``confirm``, ``commit_create``
(which also closes the upload, in C4's transaction) and ``abandon`` like any creation;
:meth:`close_settled_upload` closes an upload an older release left open beside its ready
document. An upload that stages an attachment starts with :meth:`begin_staged_upload` (A1
with the upload's row) and ends with ``confirm_staged`` and :meth:`finish_upload` (after A3).

Workers (``Sweeper``): :meth:`claim`, :meth:`remove_swept`, :meth:`roll_forward`,
:meth:`hand_to_deletion` (also the fence of a stale staged attachment), :meth:`pointed_at`,
:meth:`remove_deleted`, :meth:`purge_keys`; an upload's row goes with its intent's
(``staged_handles`` names the parts to drop first).

Held documents (``protocol/held.py``): C4 and the roll-forward make a held creation ``held``
and insert its work rows; the moves out of ``held`` (ready, or rejected to the deletion
path) are :class:`blobledger.protocol.held.Held`'s, built on these statements.

Statements are built once (building one per call cost more CPU than the round trip). On
PostgreSQL an unkeyed creation's C1, and its C4 under the deferred retag with nothing to
hold, are those same statements joined into one each and run in autocommit
(:mod:`blobledger.protocol.single`: one round trip per step).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Row,
    Table,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger.config import Settings, held_by_settings, sweep_margin
from blobledger.db import Database
from blobledger.errors import AttachLost, Digests, InvalidInput, NameTaken, QuotaExceeded
from blobledger.protocol import events, single
from blobledger.protocol.clock import at
from blobledger.protocol.documents import Document
from blobledger.protocol.models import (
    BlobKind,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    EventType,
    IdempotencyKeyRow,
    KeyState,
    ProcessingRow,
    UploadMode,
    UploadRow,
    UploadState,
    WorkState,
)
from blobledger.protocol.owners import Owner, owner_holds
from blobledger.protocol.variant_owner import detach_variants

documents: Table = DocumentRow.__table__  # type: ignore[assignment]
blobs: Table = BlobRow.__table__  # type: ignore[assignment]
keys: Table = IdempotencyKeyRow.__table__  # type: ignore[assignment]
uploads: Table = UploadRow.__table__  # type: ignore[assignment]
processing: Table = ProcessingRow.__table__  # type: ignore[assignment]

PENDING, COMMITTED, DELETING, ATTACHED = (s.value for s in BlobState)
#: the metadata key that makes an upload stage an attachment instead of a document
ATTACHMENT_KEY = "attachment"
#: the metadata key by which an upload's writer asks that its document be held ("true")
HOLD_KEY = "hold"
#: the name of a pending document whose real name is not known yet: control characters are
#: never part of a real name (``names.check_document_name``), so it cannot collide
PLACEHOLDER = "\x01unnamed:"
NOW = at("now_s")  # the database's clock plus the offset
LEASE = at("lease_s")  # NOW plus the lease being granted
CUTOFF = at("cutoff_s")  # NOW minus an age (a takeover margin, a sweep age)
EXPIRES = at("expires_s")  # NOW plus the idempotency retention


#: how a worker's claim token begins (a writer's token is 32 hex digits, never with ``:``)
CLAIM_PREFIX = "s:"


def new_token() -> str:
    """A writer's owner token: unique per attempt."""
    return secrets.token_hex(16)


def claim_token() -> str:
    """A worker's owner token (a sweeper's or the deletion path's claim): unique per claim,
    told from a writer's by :data:`CLAIM_PREFIX`. No writer takes over a claimed intent."""
    return CLAIM_PREFIX + secrets.token_hex(15)


def readable(status: str) -> bool:
    """Whether a document in ``status`` shows its bytes to readers: ``ready`` alone (never
    ``pending``, nor ``held`` until every processor accepted it). The one decision every read
    of a document's bytes goes through (:meth:`Ledger.get` and :meth:`Ledger.former`)."""
    return status == DocumentStatus.READY.value


def claimed(attempt: str | None) -> bool:
    """Whether an owner token is a worker's claim (not a writer's attempt)."""
    return attempt is not None and attempt.startswith(CLAIM_PREFIX)


# -- writers' statements ------------------------------------------------------------------
_insert_document = insert(documents).values(
    status=DocumentStatus.PENDING.value, version=1, created_at=NOW, updated_at=NOW)
_insert_blob = insert(blobs).values(
    state=PENDING, lease_until=LEASE, created_at=NOW, changed_at=NOW)
_insert_key = insert(keys).values(state=KeyState.PENDING.value, created_at=NOW)
_drop_expired_key = delete(keys).where(
    keys.c.key == bindparam("k_key"), keys.c.state == KeyState.DONE.value,
    keys.c.expires_at <= NOW)
_mine = (blobs.c.name == bindparam("b_name"), blobs.c.state == PENDING,
         blobs.c.attempt == bindparam("b_attempt"))
_confirm = update(blobs).where(*_mine).values(lease_until=LEASE)
#: a writer's row, not a worker's claim (NULL: an older release's attempt)
_unclaimed = or_(blobs.c.attempt.is_(None), ~blobs.c.attempt.startswith(CLAIM_PREFIX))
_take_over = update(blobs).where(
    blobs.c.name == bindparam("b_name"), blobs.c.state == PENDING,
    blobs.c.attempt.is_not_distinct_from(bindparam("b_seen")),  # NULL: an older release's
    blobs.c.lease_until < CUTOFF, _unclaimed,
).values(attempt=bindparam("b_attempt"), lease_until=LEASE, changed_at=NOW)
_rename = update(documents).where(
    documents.c.id == bindparam("d_id"), documents.c.status == DocumentStatus.PENDING.value,
    documents.c.name == bindparam("d_placeholder"),
).values(name=bindparam("d_name"), hold=documents.c.hold | bindparam("d_hold"))
_commit_blob = update(blobs).where(*_mine).values(
    state=COMMITTED, attempt=None, size=bindparam("b_size"), sha256=bindparam("b_sha256"),
    md5=bindparam("b_md5"), changed_at=NOW, lease_until=NOW)
#: C4/R4 with the deferred retag: the same compare-and-set, which also records, in the same
#: statement, that the blob (still tagged ``pending``) owes its retag to ``committed``
_commit_blob_owed = _commit_blob.values(retag_due=NOW)
#: C4 by a writer that did C3 and found its intent claimed by a sweeper that has not
#: decided yet: the roll-forward the sweeper would make, decided by the writer (whichever
#: compare-and-set wins decides; a sweeper that fenced the row to ``deleting`` first wins)
_commit_claimed = update(blobs).where(
    blobs.c.name == bindparam("b_name"), blobs.c.state == PENDING,
    blobs.c.kind == BlobKind.CREATE.value, blobs.c.attempt.startswith(CLAIM_PREFIX),
).values(state=COMMITTED, attempt=None, size=bindparam("b_size"), sha256=bindparam("b_sha256"),
         md5=bindparam("b_md5"), changed_at=NOW, lease_until=NOW)
#: C4's document: ``ready``, or ``held`` when its creation is held and processors are
#: configured (``d_processing``): then it waits for their verdicts (``protocol/held.py``)
_ready_document = update(documents).where(
    documents.c.id == bindparam("d_id"), documents.c.status == DocumentStatus.PENDING.value,
    documents.c.blob_name == bindparam("b_name"),
).values(status=case((documents.c.hold == true(), bindparam("d_processing")),
                     else_=DocumentStatus.READY.value), size=bindparam("b_size"),
         sha256=bindparam("b_sha256"), md5=bindparam("b_md5"), updated_at=NOW,
         ).returning(*documents.c)
_key_done = update(keys).where(
    keys.c.blob_name == bindparam("b_name"), keys.c.state == KeyState.PENDING.value,
).values(state=KeyState.DONE.value, name=bindparam("k_name"), sha256=bindparam("b_sha256"),
         response=bindparam("k_response"), expires_at=EXPIRES)
_point_document = update(documents).where(
    documents.c.id == bindparam("d_id"), documents.c.status == DocumentStatus.READY.value,
    documents.c.version == bindparam("d_version"),
).values(blob_name=bindparam("b_name"), version=bindparam("d_version") + 1,
         size=bindparam("b_size"), sha256=bindparam("b_sha256"), md5=bindparam("b_md5"),
         content_type=bindparam("d_content_type"), updated_at=NOW,
         ).returning(*documents.c)
_to_deleting = update(blobs).where(
    blobs.c.name == bindparam("b_name"), blobs.c.state == COMMITTED,
).values(state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW)
_abandon = update(blobs).where(*_mine).values(
    state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW)
#: giving an upload up: its intent to the deletion path only while the upload is open and no
#: completion verified its bytes (a duplicate completion must not destroy its twin's work)
_give_up = update(blobs).where(*_mine, select(uploads.c.id).where(
    uploads.c.id == bindparam("u_id"), uploads.c.blob_name == blobs.c.name,
    uploads.c.state == UploadState.OPEN.value, uploads.c.sha256.is_(None)).exists(),
).values(state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW)
_drop_unverified_upload = delete(uploads).where(
    uploads.c.id == bindparam("u_id"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.sha256.is_(None))
_drop_pending_document = delete(documents).where(
    documents.c.id == bindparam("d_id"), documents.c.status == DocumentStatus.PENDING.value,
    documents.c.blob_name == bindparam("b_name"))
_drop_pending_key = delete(keys).where(
    keys.c.blob_name == bindparam("b_name"), keys.c.state == KeyState.PENDING.value)
_confirm_staged = update(blobs).where(*_mine).values(
    lease_until=LEASE, size=bindparam("b_size"), sha256=bindparam("b_sha256"),
    md5=bindparam("b_md5"))
#: A4: a staged blob to its owner, only while still pending under the token that staged it
#: (an expired lease does not stop it; a sweeper's claim replaced the token, so it does)
_attach = update(blobs).where(
    *_mine, blobs.c.kind == BlobKind.ATTACHMENT.value,
).values(state=ATTACHED, attempt=None, owner_table=bindparam("o_table"),
         owner_key=bindparam("o_key"), owner_column=bindparam("o_column"), changed_at=NOW,
         lease_until=NOW).returning(*events.attachment_columns(blobs))
_owned = (blobs.c.state == ATTACHED, blobs.c.owner_table == bindparam("o_table"),
          blobs.c.owner_key == bindparam("o_key"))
_insert_upload = insert(uploads).values(
    state=UploadState.OPEN.value, offset=0, parts="[]", created_at=NOW, changed_at=NOW,
    expires_at=LEASE)
#: the open uploads of an owner: not completed, not expired, their intent still pending
_open_uploads = select(func.count()).select_from(uploads).where(
    uploads.c.owner == bindparam("u_owner"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.expires_at > NOW,
    select(blobs.c.name).where(blobs.c.name == uploads.c.blob_name,
                               blobs.c.state == PENDING).exists())
#: those of them that create a document, each holding its name
_reserved_names = _open_uploads.where(uploads.c.document_id != "")
_record_parts = update(uploads).where(
    uploads.c.id == bindparam("u_id"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.attempt == bindparam("b_attempt"), uploads.c.offset == bindparam("u_seen"),
    uploads.c.expires_at > NOW,
    select(blobs.c.name).where(  # the intent itself is still this upload's
        blobs.c.name == uploads.c.blob_name, blobs.c.state == PENDING,
        blobs.c.attempt == bindparam("b_attempt")).exists(),
).values(offset=bindparam("u_offset"), parts=bindparam("u_parts"), changed_at=NOW)
#: the upload still open and its intent still this upload's (pending, its token)
_upload_mine = (
    uploads.c.id == bindparam("u_id"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.attempt == bindparam("b_attempt"),
    select(blobs.c.name).where(
        blobs.c.name == uploads.c.blob_name, blobs.c.state == PENDING,
        blobs.c.attempt == bindparam("b_attempt")).exists())
_confirm_received = update(uploads).where(*_upload_mine).values(changed_at=NOW)
_finish_upload = update(uploads).where(
    uploads.c.id == bindparam("u_id"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.attempt == bindparam("b_attempt"),
).values(state=UploadState.DONE.value, changed_at=NOW)
_close_settled_upload = update(uploads).where(
    uploads.c.id == bindparam("u_id"), uploads.c.state == UploadState.OPEN.value,
    uploads.c.attempt == bindparam("b_attempt"),
    select(documents.c.id).where(
        documents.c.id == uploads.c.document_id, documents.c.blob_name == uploads.c.blob_name,
        documents.c.status == DocumentStatus.READY.value).exists(),
).values(state=UploadState.DONE.value, changed_at=NOW)
#: in C4's transaction, for a document it made held: one pending work row per processor
_insert_work = insert(processing).values(
    state="pending", attempt=None, lease_until=NOW, attempts=0, created_at=NOW,
    changed_at=NOW)
#: C1 and C4 (deferred, unkeyed, nothing to hold) as one statement each (PostgreSQL)
_c1_one = single.c1(_insert_document, _insert_blob)
_c4_one = single.c4_deferred(_commit_blob_owed, _ready_document)
_drop_abandoned = delete(blobs).where(
    blobs.c.name == bindparam("b_name"), blobs.c.state == DELETING,
    blobs.c.attempt.is_(None))


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


@dataclass
class Intent:
    """A pending blob row this process owns while ``attempt`` is still its token."""

    blob_name: str
    document_id: str
    kind: BlobKind
    attempt: str
    content_type: str
    expected_version: int | None = None  # a replacement's precondition
    old_blob: str | None = None  # the blob a replacement moves away from
    placeholder: str | None = None  # a creation recorded under a placeholder name
    deadline: float = 0.0  # the event loop's clock: the upload must finish by then
    hold: bool = False  # the writer asks C4 to make the creation held (docs/pipeline.md)
    owner: str | None = None  # who writes it (``api.auth.owner_of``), told its held state
    #: whether an idempotency key may hold this intent (C4 then records its first response;
    #: False only where C1 reserved none: C4 skips that statement)
    keyed: bool = True
    #: the document's name once known (C1's, or the confirm's rename of a placeholder)
    name: str | None = None


@dataclass(frozen=True)
class KeyRecord:
    """What an idempotency key holds: an intent in flight or the first response."""

    key: str
    state: str
    blob_name: str
    document_id: str
    name: str | None
    content_type: str
    sha256: str | None
    response: Document | None


@dataclass(frozen=True)
class UploadRecord:
    """A resumable upload as the database holds it (``expired`` on the database's clock)."""

    id: str
    mode: UploadMode
    blob_name: str
    document_id: str
    attempt: str
    state: str
    length: int
    offset: int
    handle: str
    parts: list[str]
    meta: dict[str, str]
    expires_at: Any
    expired: bool
    sha256: str | None = None  # what the service verified from the stored bytes (before C3)

    @property
    def attachment(self) -> bool:
        """Whether the upload stages an attachment (A1-A3) rather than creating a
        document (its metadata holds the key ``attachment``)."""
        return ATTACHMENT_KEY in self.meta

    def intent(self, content_type: str) -> Intent:
        kind = BlobKind.ATTACHMENT if self.attachment else BlobKind.CREATE
        return Intent(self.blob_name, self.document_id, kind, self.attempt, content_type,
                      keyed=False)  # an upload reserves no idempotency key


@dataclass(frozen=True)
class UploadOwner:
    """Who creates an upload (``id``: a digest of its token, see
    ``blobledger.api.auth.owner_of``) and how many open uploads, and names reserved by
    document uploads among them, it may hold at once (QuotaExceeded beyond)."""

    id: str
    max_open: int
    max_names: int


async def _within_quota(conn: Any, owner: UploadOwner | None, names: bool,
                        times: dict[str, float]) -> None:
    """QuotaExceeded if ``owner`` already holds its share (checked inside the creating
    transaction; concurrent creations by one owner may pass it together, at most one each)."""
    if owner is None:
        return
    params = dict(u_owner=owner.id, **times)
    held = int((await conn.execute(_open_uploads, params)).scalar_one())
    if held >= owner.max_open:
        raise QuotaExceeded("too-many-open-uploads",
                            f"this token already has {held} open uploads (at most "
                            f"{owner.max_open}): complete or terminate some first")
    if names and int((await conn.execute(_reserved_names, params)).scalar_one()) \
            >= owner.max_names:
        raise QuotaExceeded("too-many-reserved-names",
                            f"this token's open uploads already hold {owner.max_names} "
                            "document names: complete or terminate some first")


@dataclass(frozen=True)
class ReplaceOutcome:
    """R4: the document as written, or why not (``lost``: the intent was taken; else the
    document moved on: ``current_version`` None if it is gone)."""

    document: Document | None = None
    lost: bool = False
    current_version: int | None = None


class Transitions:
    """The named compare-and-set steps, on one database, for one ledger's settings."""

    def __init__(self, db: Database, settings: Settings, offset: float = 0.0) -> None:
        self.db = db
        self.settings = settings
        self.offset = offset

    # -- time parameters ------------------------------------------------------------------
    def times(self, *, lease: float | None = None, cutoff: float | None = None,
              expires: float | None = None) -> dict[str, float]:
        """Bound seconds for NOW, LEASE (now + lease), CUTOFF (now - cutoff), EXPIRES."""
        values = {"now_s": self.offset}
        if lease is not None:
            values["lease_s"] = self.offset + lease
        if cutoff is not None:
            values["cutoff_s"] = self.offset - cutoff
        if expires is not None:
            values["expires_s"] = self.offset + expires
        return values

    @property
    def deferred(self) -> bool:
        """Whether C4/R4 leave the retag to the retag worker (``BLOBLEDGER_RETAG``)."""
        return self.settings.retag == "deferred"

    @property
    def takeover_margin(self) -> float:
        """How long past its lease a retry waits before displacing an attempt: the margin
        the sweeper keeps past the upload deadline (``config.sweep_margin``)."""
        return sweep_margin(self.settings.upload_deadline)

    async def now(self) -> Any:
        async with self.db.transaction(readonly=True) as conn:
            return (await conn.execute(select(NOW), self.times())).scalar_one()

    # -- idempotency keys -----------------------------------------------------------------
    async def find_key(self, key: str) -> KeyRecord | None:
        """The key's record; a finished one past its retention counts as absent."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(
                select(keys, (keys.c.expires_at > NOW).label("live"))
                .where(keys.c.key == key), self.times())).one_or_none()
        if row is None or (row.state == KeyState.DONE and not row.live):
            return None
        response = None
        if row.response is not None:
            response = Document.from_json(json.loads(row.response))
        return KeyRecord(row.key, row.state, row.blob_name, row.document_id, row.name,
                         row.content_type, row.sha256, response)

    # -- C1 -------------------------------------------------------------------------------
    async def begin_create(self, intent: Intent, name: str, key: str | None) -> None:
        """C1: the pending document, its pending blob row (this attempt's, leased) and the
        idempotency key's reservation, in one transaction. NameTaken if the name is taken;
        the database's IntegrityError if the key is (the caller looks the key up again)."""
        times = self.times(lease=self.settings.upload_deadline)
        document = dict(id=intent.document_id, name=name, blob_name=intent.blob_name,
                        content_type=intent.content_type, **self._holding(intent, name))
        blob = dict(name=intent.blob_name, document_id=intent.document_id,
                    kind=intent.kind.value, content_type=intent.content_type,
                    attempt=intent.attempt)
        try:
            if self.c1_in_one(key):
                async with self.db.statement() as conn:
                    await conn.execute(_c1_one, dict(single.c1_params(document, blob),
                                                     **times))
                return
            async with self.db.transaction() as conn:
                if key is not None:
                    await conn.execute(_drop_expired_key, {"k_key": key, **times})
                    await conn.execute(_insert_key, dict(
                        key=key, blob_name=intent.blob_name, document_id=intent.document_id,
                        name=None if intent.placeholder else name,
                        content_type=intent.content_type, **times))
                await conn.execute(_insert_document, dict(document, **times))
                await conn.execute(_insert_blob, dict(blob, **times))
        except DBIntegrityError as exc:
            if key is not None and _names_key(exc):
                raise
            raise NameTaken(f"a document named {name!r} already exists") from None

    def c1_in_one(self, key: str | None) -> bool:
        """Whether C1 runs as one autocommit statement (:mod:`blobledger.protocol.single`):
        an unkeyed creation on PostgreSQL."""
        return key is None and self.db.single_statements

    async def take_over(self, record: KeyRecord) -> Intent | None:
        """A retry displaces the attempt that holds ``record``'s intent, if that attempt's
        lease expired more than the sweeper's margin ago; None if it is still owned."""
        async with self.db.transaction() as conn:
            row = (await conn.execute(
                select(blobs.c.attempt, blobs.c.content_type, documents.c.name)
                .join(documents, documents.c.id == blobs.c.document_id, isouter=True)
                .where(blobs.c.name == record.blob_name, blobs.c.state == PENDING)
            )).one_or_none()
            if row is None:
                return None
            attempt = new_token()
            won = await conn.execute(_take_over, dict(
                b_name=record.blob_name, b_seen=row.attempt, b_attempt=attempt,
                **self.times(lease=self.settings.upload_deadline,
                             cutoff=self.takeover_margin)))
            if _count(won) != 1:
                return None
        placeholder = row.name if row.name and row.name.startswith(PLACEHOLDER) else None
        return Intent(record.blob_name, record.document_id, BlobKind.CREATE, attempt,
                      row.content_type, placeholder=placeholder)

    # -- resumable uploads ----------------------------------------------------------------
    async def begin_upload(self, intent: Intent, name: str, upload_id: str, length: int,
                           handle: str, meta: dict[str, str], *,
                           mode: UploadMode = UploadMode.TUS,
                           owner: UploadOwner | None = None) -> None:
        """C1 of a resumable or direct upload: the pending document, its blob row (this
        upload's, leased until the upload expires, so no sweeper takes it before) and the
        upload's row (offset 0, ``owner``'s), in one transaction. NameTaken if the name is
        taken, QuotaExceeded if ``owner`` holds its share of open uploads or names."""
        times = self.times(lease=self._expiry(mode))
        try:
            async with self.db.transaction() as conn:
                await _within_quota(conn, owner, True, times)
                await conn.execute(_insert_document, dict(
                    id=intent.document_id, name=name, blob_name=intent.blob_name,
                    content_type=intent.content_type, **self._holding(intent, name),
                    **times))
                await conn.execute(_insert_blob, dict(
                    name=intent.blob_name, document_id=intent.document_id,
                    kind=intent.kind.value, content_type=intent.content_type,
                    attempt=intent.attempt, **times))
                await conn.execute(_insert_upload, dict(
                    id=upload_id, mode=mode.value, blob_name=intent.blob_name,
                    document_id=intent.document_id,
                    attempt=intent.attempt, length=length, handle=handle,
                    meta=json.dumps(meta), owner=owner.id if owner else None, **times))
        except DBIntegrityError:
            raise NameTaken(f"a document named {name!r} already exists") from None

    async def begin_staged_upload(self, intent: Intent, filename: str | None, upload_id: str,
                                  length: int, meta: dict[str, str], *,
                                  mode: UploadMode = UploadMode.TUS,
                                  owner: UploadOwner | None = None) -> None:
        """A1 of an attachment that arrives as a resumable or direct upload: the pending
        attachment row, owned by no document (this upload's, leased until the upload
        expires) and the upload's row (offset 0, no document: ``document_id`` empty,
        ``owner``'s), in one transaction; QuotaExceeded if ``owner`` holds its share."""
        assert intent.kind == BlobKind.ATTACHMENT and ATTACHMENT_KEY in meta
        times = self.times(lease=self._expiry(mode))
        async with self.db.transaction() as conn:
            await _within_quota(conn, owner, False, times)
            await conn.execute(_insert_blob, dict(
                name=intent.blob_name, document_id=None, kind=intent.kind.value,
                content_type=intent.content_type, attempt=intent.attempt, filename=filename,
                **times))
            await conn.execute(_insert_upload, dict(
                id=upload_id, mode=mode.value, blob_name=intent.blob_name, document_id="",
                attempt=intent.attempt, length=length, handle="", meta=json.dumps(meta),
                owner=owner.id if owner else None, **times))

    def _holding(self, intent: Intent, name: str) -> dict[str, object]:
        """C1's hold decision (asked by the writer, or the settings' policy for the name; a
        placeholder is judged again when it is renamed) and the writer's name."""
        hold = intent.hold or (intent.placeholder is None
                               and held_by_settings(self.settings, name))
        return {"hold": hold, "owner": intent.owner}

    def _settle(self) -> dict[str, str]:
        """C4's parameter: what a held creation becomes (``held`` while processors are
        configured; with none there is nothing to wait for)."""
        status = DocumentStatus.HELD if self.settings.processors else DocumentStatus.READY
        return {"d_processing": status.value}

    async def _hold(self, conn: Any, row: Any) -> None:
        """In C4's transaction: a document made ``held`` gets its pending work, one row per
        configured processor, for its version."""
        if row.status != DocumentStatus.HELD:
            return
        await conn.execute(_insert_work, [dict(
            document_id=row.id, version=row.version, processor=name, owner=row.owner,
            name=row.name, **self.times()) for name in self.settings.processors])

    def _expiry(self, mode: UploadMode) -> float:
        return (self.settings.resumable_expiry if mode == UploadMode.TUS
                else self.settings.direct_upload_expiry)

    async def set_handle(self, upload: UploadRecord, handle: str) -> bool:
        """The store's handle of the staged upload (started after C1), once."""
        async with self.db.transaction() as conn:
            won = await conn.execute(update(uploads).where(
                uploads.c.id == upload.id, uploads.c.attempt == upload.attempt,
                uploads.c.state == UploadState.OPEN.value, uploads.c.handle == "",
            ).values(handle=handle))
        return _count(won) == 1

    async def find_upload(self, upload_id: str) -> UploadRecord | None:
        """The upload's row, or None if there is none (never made, finished and forgotten,
        terminated, or swept with its intent)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(
                select(uploads, (uploads.c.expires_at <= NOW).label("expired"))
                .where(uploads.c.id == upload_id), self.times())).one_or_none()
        if row is None:
            return None
        return UploadRecord(row.id, UploadMode(row.mode), row.blob_name, row.document_id,
                            row.attempt, row.state,
                            row.length, row.offset, row.handle, json.loads(row.parts),
                            json.loads(row.meta), row.expires_at, bool(row.expired),
                            row.sha256)

    async def record_parts(self, upload: UploadRecord, seen: int, offset: int,
                           parts: Sequence[str]) -> bool:
        """The durable offset: ``offset`` bytes are stored in ``parts``, only if the upload
        is still open, unexpired, owned by its token and at ``seen`` (a concurrent request
        that advanced it first wins; this one loses and stores nothing more)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_record_parts, dict(
                u_id=upload.id, b_attempt=upload.attempt, u_seen=seen, u_offset=offset,
                u_parts=json.dumps(list(parts)), **self.times()))
        return _count(won) == 1

    async def record_verified(self, upload: UploadRecord, sha256: str) -> bool:
        """Before C3: the SHA-256 the service computed from the stored bytes, only while the
        upload and its intent are still this upload's. The sweeper rolls a committed
        upload forward only if this was recorded (a client that tagged its own direct
        upload ``committed`` gets it deleted instead)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(update(uploads).where(
                uploads.c.id == upload.id, uploads.c.state == UploadState.OPEN.value,
                uploads.c.attempt == upload.attempt,
                select(blobs.c.name).where(
                    blobs.c.name == uploads.c.blob_name, blobs.c.state == PENDING,
                    blobs.c.attempt == upload.attempt).exists(),
            ).values(sha256=sha256, changed_at=NOW), self.times())
        return _count(won) == 1

    async def confirm_received(self, upload: UploadRecord) -> bool:
        """After ``serve`` stored a direct upload's bytes: the upload is still open and its
        intent still this upload's, by compare-and-set on the upload's row (the intent's
        lease is left as the URL's expiry set it). False if the intent was lost (swept)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_confirm_received, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))
        return _count(won) == 1

    async def unverified(self, names: Sequence[str]) -> dict[str, str | None]:
        """Which of these blobs belong to uploads: name -> the verified SHA-256 (or None)."""
        async with self.db.transaction(readonly=True) as conn:
            rows = (await conn.execute(select(uploads.c.blob_name, uploads.c.sha256).where(
                uploads.c.blob_name.in_(names)))).all()
        return {r.blob_name: r.sha256 for r in rows}

    async def finish_upload(self, upload: UploadRecord) -> bool:
        """After A3 (a staged attachment's upload): the upload is done; nothing is ever
        written to it again. A document's upload ends with C4 itself (``commit_create``)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_finish_upload, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))
        return _count(won) == 1

    async def close_settled_upload(self, upload: UploadRecord) -> None:
        """A document's upload still open although its document is ready (an older release
        made C4 and the upload's end two transactions, and died between them): done, by
        compare-and-set on the upload's token and the document ready with its blob. The
        caller reads the upload again: a twin may have closed it at the same moment."""
        async with self.db.transaction() as conn:
            await conn.execute(_close_settled_upload, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))

    async def upload_live(self, blob_name: str) -> bool:
        """Whether an open, unexpired upload owns the blob name (its parts are in flight)."""
        async with self.db.transaction(readonly=True) as conn:
            found = (await conn.execute(select(uploads.c.id).where(
                uploads.c.blob_name == blob_name, uploads.c.state == UploadState.OPEN.value,
                uploads.c.expires_at > NOW), self.times())).first()
        return found is not None

    async def staged_handles(self, names: Sequence[str]) -> dict[str, str]:
        """Which of these blobs belong to resumable uploads: name -> the store's handle."""
        async with self.db.transaction(readonly=True) as conn:
            rows = (await conn.execute(select(uploads.c.blob_name, uploads.c.handle).where(
                uploads.c.blob_name.in_(names)))).all()
        return {r.blob_name: r.handle for r in rows}

    # -- C3/R3 prelude --------------------------------------------------------------------
    async def confirm(self, intent: Intent, rename: str | None = None) -> bool:
        """The intent is still this attempt's: extend its lease (and give a creation recorded
        under a placeholder its real name: NameTaken if that is taken). False if lost."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt,
                      **self.times(lease=self.settings.upload_deadline))
        try:
            async with self.db.transaction() as conn:
                if _count(await conn.execute(_confirm, params)) != 1:
                    return False
                if rename is not None and intent.placeholder is not None:
                    await conn.execute(_rename, dict(
                        d_id=intent.document_id, d_placeholder=intent.placeholder,
                        d_name=rename, d_hold=held_by_settings(self.settings, rename)))
                    await conn.execute(update(keys).where(
                        keys.c.blob_name == intent.blob_name,
                        keys.c.state == KeyState.PENDING.value).values(name=rename))
        except DBIntegrityError:
            raise NameTaken(f"a document named {rename!r} already exists") from None
        if rename is not None:
            intent.placeholder, intent.name = None, rename
        return True

    async def owns(self, intent: Intent) -> bool:
        """Whether the intent is still this attempt's (pending, its token). Reads only: for
        a failure path that must tell a lost intent from a failed step."""
        async with self.db.transaction(readonly=True) as conn:
            found = (await conn.execute(select(blobs.c.name).where(*_mine), dict(
                b_name=intent.blob_name, b_attempt=intent.attempt))).first()
        return found is not None

    # -- C4 -------------------------------------------------------------------------------
    async def commit_create(self, intent: Intent, digests: Digests,
                            upload_id: str | None = None) -> Document | None:
        """C4 (after C3): blob row committed and document ready, only while the intent is
        this attempt's, or claimed by a sweeper that has not decided yet (the writer then
        makes the roll-forward that sweeper would make; a sweeper that fenced the row first
        wins); the key's first response recorded; with ``upload_id``, that upload done in the
        same transaction (no state between C4 and the upload's end). None if the intent was
        lost."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt, d_id=intent.document_id,
                      b_size=digests.size, b_sha256=digests.sha256, b_md5=digests.md5,
                      u_id=upload_id, **self._settle(),
                      **self.times(expires=self.settings.idempotency_retention))
        deferred = self.deferred
        if (deferred and not intent.keyed and upload_id is None and intent.name is not None
                and not self.settings.processors and self.db.single_statements):
            return await self._commit_create_in_one(intent, digests, params)
        async with self.db.transaction() as conn:
            if _count(await conn.execute(_commit_blob_owed if deferred else _commit_blob,
                                         params)) != 1 and (
                    deferred  # the blob is still tagged pending: the claim's delete decides
                    or intent.kind != BlobKind.CREATE
                    or _count(await conn.execute(_commit_claimed, params)) != 1):
                return None
            row = (await conn.execute(_ready_document, params)).one()
            await self._hold(conn, row)
            doc = Document.from_row(row)
            if doc.status == DocumentStatus.READY:  # a held one's is written at its acceptance
                await events.document_ready(conn, doc, md5=digests.md5, offset=self.offset)
            if intent.keyed:
                await conn.execute(_key_done, dict(
                    params, k_name=doc.name, k_response=json.dumps(doc.to_json())))
            if upload_id is not None:
                await conn.execute(_finish_upload, params)
        return doc

    async def _commit_create_in_one(self, intent: Intent, digests: Digests,
                                    params: dict[str, Any]) -> Document | None:
        """C4 as one statement (:func:`blobledger.protocol.single.c4_deferred`): the event's
        values are those :meth:`commit_create`'s transaction would write for the document
        this C4 makes ready (it cannot be held: no processor is configured)."""
        assert intent.name is not None
        event = events.document_values(
            EventType.READY, intent.document_id, intent.name, 1, digests.size,
            intent.content_type, digests.sha256, intent.blob_name, digests.md5)
        async with self.db.statement() as conn:
            row = (await conn.execute(_c4_one, dict(
                params, **single.c4_event_params(event)))).one_or_none()
        return None if row is None else Document.from_row(row)

    async def settled_create(self, intent: Intent) -> Document | None:
        """After a lost C4: the document if the sweeper rolled this creation forward (ready,
        or held: a held creation's roll-forward makes it held, as C4 would)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(documents).where(
                documents.c.id == intent.document_id))).one_or_none()
        if (row is None or row.status not in (DocumentStatus.READY, DocumentStatus.HELD)
                or row.blob_name != intent.blob_name or row.version != 1):
            return None
        return Document.from_row(row)

    # -- R1, R4 ---------------------------------------------------------------------------
    async def begin_replace(self, intent: Intent) -> None:
        """R1: the replacement's pending blob row, this attempt's and leased."""
        async with self.db.transaction() as conn:
            await conn.execute(_insert_blob, dict(
                name=intent.blob_name, document_id=intent.document_id,
                kind=intent.kind.value, content_type=intent.content_type,
                attempt=intent.attempt, **self.times(lease=self.settings.upload_deadline)))

    async def commit_replace(self, intent: Intent, digests: Digests) -> ReplaceOutcome:
        """R4: the document points at the new blob and its version +1 only if the version
        still matches and the intent is still this attempt's; the old blob to the deletion
        path. A document that moved on sends the new blob to the deletion path instead."""
        assert intent.expected_version is not None
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt, d_id=intent.document_id,
                      d_version=intent.expected_version, d_content_type=intent.content_type,
                      b_size=digests.size, b_sha256=digests.sha256, b_md5=digests.md5,
                      **self.times())
        async with self.db.transaction() as conn:
            if _count(await conn.execute(_commit_blob_owed if self.deferred else _commit_blob,
                                         params)) != 1:
                return ReplaceOutcome(lost=True)
            row = (await conn.execute(_point_document, params)).one_or_none()
            if row is None:
                await conn.execute(_to_deleting, params)
                current = (await conn.execute(select(documents.c.version).where(
                    documents.c.id == intent.document_id,
                    documents.c.status == DocumentStatus.READY.value))).scalar_one_or_none()
                return ReplaceOutcome(current_version=current)
            await conn.execute(_to_deleting, dict(params, b_name=intent.old_blob))
            await detach_variants(conn, intent.document_id, intent.expected_version, params)
            doc = Document.from_row(row)
            await events.write(conn, [events.document_row(
                EventType.REPLACED, doc, digests.md5, previous_blob=intent.old_blob)],
                self.offset)
        return ReplaceOutcome(document=doc)

    # -- delete ---------------------------------------------------------------------------
    async def delete_document(self, doc_id: str, version: int) -> bool:
        """Remove a ready document at ``version``; its blob to the deletion path, and
        ``document.deleted`` written with it."""
        async with self.db.transaction() as conn:
            row = (await conn.execute(
                delete(documents)
                .where(documents.c.id == doc_id, documents.c.version == version,
                       documents.c.status == DocumentStatus.READY.value)
                .returning(*documents.c))).one_or_none()
            if row is None:
                return False
            await conn.execute(_to_deleting, dict(b_name=row.blob_name, **self.times()))
            await detach_variants(conn, doc_id, version, self.times())
            await events.write(conn, [events.document_row(
                EventType.DELETED, Document.from_row(row), row.md5)], self.offset)
        return True

    # -- a live writer's failure path -----------------------------------------------------
    async def abandon(self, intent: Intent, upload_id: str | None = None) -> bool:
        """The intent, while still this attempt's, to the deletion path (a creation's pending
        document and key go with it). False if someone else owns it now. With ``upload_id``
        (an upload given up), only while that upload is still open and unverified: a
        completion that recorded the verified SHA-256 first wins, in the same transaction
        (the upload's row is re-checked under its lock, so a concurrent ``record_verified``
        is either seen or refused)."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt,
                      d_id=intent.document_id, u_id=upload_id, **self.times())
        try:
            async with self.db.transaction() as conn:
                fenced = _abandon if upload_id is None else _give_up
                if _count(await conn.execute(fenced, params)) != 1:
                    return False
                if upload_id is not None and \
                        _count(await conn.execute(_drop_unverified_upload, params)) != 1:
                    raise _Undo  # verified meanwhile: nothing of this transaction stays
                if intent.kind == BlobKind.CREATE:
                    await conn.execute(_drop_pending_document, params)
                    await conn.execute(_drop_pending_key, params)
                await conn.execute(delete(uploads).where(
                    uploads.c.blob_name == intent.blob_name))
        except _Undo:
            return False
        return True

    async def remove_abandoned(self, blob_name: str) -> bool:
        """An abandoned intent whose blob is gone: its row, unless a sweeper claimed it."""
        async with self.db.transaction() as conn:
            return _count(await conn.execute(_drop_abandoned, {"b_name": blob_name})) == 1

    # -- A1 and the step before A3 --------------------------------------------------------
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

    async def pointed_blob(self, doc_id: str, blob_name: str) -> tuple[Row[Any] | None,
                                                                         str | None]:
        """The row of ``blob_name`` if it holds bytes ``doc_id`` showed its readers, and the
        document's name if it is still there: its bytes (``committed``) or bytes it left
        (``deleting``: replaced, deleted) that the deletion path has not removed, while the
        document is ready (:func:`readable`) or gone, and was never rejected. So a held
        document's blob, and a rejected one's, is never one (an attachment's row names no
        document)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(blobs).where(
                blobs.c.name == blob_name, blobs.c.document_id == doc_id,
                blobs.c.state.in_((COMMITTED, DELETING))))).one_or_none()
            doc = (await conn.execute(select(documents.c.name, documents.c.status).where(
                documents.c.id == doc_id))).one_or_none()
            rejected = (await conn.execute(select(processing.c.document_id).where(
                processing.c.document_id == doc_id,
                processing.c.state == WorkState.REJECTED.value).limit(1))).first()
        name = doc.name if doc is not None else None
        if row is None or rejected is not None or (doc is not None
                                                   and not readable(doc.status)):
            return None, name
        return row, name

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


def _as_datetime(value: object) -> datetime:
    """A timestamp as the driver returned it (SQLite: text) as a naive datetime."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return datetime.fromisoformat(str(value)).replace(tzinfo=None)


class _Undo(Exception):
    """Raised inside a transaction to roll it back: its compare-and-set lost half-way."""


def _rows(result: Any) -> list[tuple[Any, ...]]:
    """The rows a statement returned, as tuples (an application's SQLAlchemy connection, or
    the Django integration's)."""
    return [tuple(row) for row in result.all()]


def _count(result: object) -> int:
    return int(getattr(result, "rowcount", 0))


def _names_key(exc: DBIntegrityError) -> bool:
    text = str(exc.orig).lower()
    return "idempotency_keys" in text or "pk_idempotency" in text

