"""The tables, the database clock's bound times and the owner tokens, and every
compare-and-set statement of the transitions, built once (building one per call cost more
CPU than the round trip); a step of :mod:`blobledger.protocol.transitions` runs them."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, case, delete, func, insert, or_, select, true, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger.errors import BlobLedgerError, BucketNotFound, NameTaken
from blobledger.protocol import events, single
from blobledger.protocol.clock import at
from blobledger.protocol.models import (
    BlobKind,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    IdempotencyKeyRow,
    KeyState,
    ProcessingRow,
    UploadRow,
    UploadState,
)

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


def _refused_c1(exc: DBIntegrityError, bucket: str, name: str) -> BlobLedgerError:
    """What a C1 the database refused means: the bucket is gone (the documents' foreign
    key: deleted since the writer looked it up), else the name is taken."""
    if "foreign key" in str(exc.orig).lower():
        return BucketNotFound(f"no bucket {bucket[:70]!r}")
    return NameTaken(f"a document named {name!r} already exists")


def _names_key(exc: DBIntegrityError) -> bool:
    text = str(exc.orig).lower()
    return "idempotency_keys" in text or "pk_idempotency" in text

