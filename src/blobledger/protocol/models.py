"""The records: ``documents`` and ``blobs`` (the blobs table doubles as the storage outbox),
and ``events`` (the outbox of what happened, with its delivery log).

Embedded in an application's database, the tables may carry a prefix and live in a schema of
the application's choosing: ``BLOBLEDGER_TABLE_PREFIX`` (``bl_`` gives ``bl_blobs``, and
``ix_bl_blobs_…`` indexes) and ``BLOBLEDGER_DB_SCHEMA`` (PostgreSQL). Both are read once,
when this module is imported, because every prebuilt statement names these tables: a process
holds one ledger layout. Set them for every process of the deployment alike (the application,
``blobledger sweep``, ``check``, ``migrate``).

Timestamps are naive UTC ``datetime`` values on both SQLite and PostgreSQL; convert at the
edges with :func:`as_utc`. Nothing here talks to storage.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from blobledger._base.scopes import DEFAULT_BUCKET as DEFAULT_BUCKET
from blobledger.config import table_layout
from blobledger.errors import ConfigError

TABLE_PREFIX_ENV = "BLOBLEDGER_TABLE_PREFIX"
SCHEMA_ENV = "BLOBLEDGER_DB_SCHEMA"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,30}$")


def _layout(name: str, allow_empty: bool) -> str:
    value = table_layout(name)
    if value == "" and allow_empty:
        return value
    if not _IDENTIFIER.match(value):
        raise ConfigError(f"{name} must be a lower-case SQL identifier ([a-z_][a-z0-9_]*), "
                          f"not {value!r}")
    return value


#: the prefix of the ledger's table and index names ("" by default)
TABLE_PREFIX = _layout(TABLE_PREFIX_ENV, allow_empty=True)
#: the schema of the ledger's tables (None: the connection's default)
SCHEMA = _layout(SCHEMA_ENV, allow_empty=True) or None


def table_name(base: str) -> str:
    """The name of one of the ledger's tables (``blobs``) under the configured prefix."""
    return TABLE_PREFIX + base


def index_name(base: str, suffix: str) -> str:
    """``ix_<table>_<suffix>``: an index of one of the ledger's tables."""
    return f"ix_{table_name(base)}_{suffix}"


class DocumentStatus(StrEnum):
    PENDING = "pending"
    READY = "ready"
    #: committed and stored, invisible to readers until every processor accepted it
    HELD = "held"


class BlobState(StrEnum):
    PENDING = "pending"
    COMMITTED = "committed"
    DELETING = "deleting"
    ATTACHED = "attached"  # an attachment's row once an owner points at it (A4)


#: The blob index tag that mirrors a row's state: the one tag the protocol sets and tests.
STATE_TAG = "state"


def state_tag(state: BlobState) -> dict[str, str]:
    """The tags (and tag condition) for a blob in ``state``: ``{"state": "<state>"}``."""
    return {STATE_TAG: state.value}


PENDING_TAG = state_tag(BlobState.PENDING)
COMMITTED_TAG = state_tag(BlobState.COMMITTED)
DELETING_TAG = state_tag(BlobState.DELETING)


class BlobKind(StrEnum):
    CREATE = "create"
    REPLACE = "replace"
    ATTACHMENT = "attachment"  # staged for an application's row (A1), owned by no document


class Base(DeclarativeBase):
    metadata = MetaData(schema=SCHEMA)


class BucketRow(Base):
    """A bucket: a namespace of documents (a name is unique within its bucket) with its own
    settings, each None where the deployment's apply (``protocol/buckets.py``)."""

    __tablename__ = table_name("buckets")

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    #: the largest object a write to the bucket may store (bytes)
    max_object_bytes: Mapped[int | None] = mapped_column(BigInteger)
    #: the media types a write may store, comma-separated (``image/*,application/pdf``)
    content_types: Mapped[str | None] = mapped_column(Text)
    #: every creation in the bucket is held (as if its writer asked for it)
    hold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False,
                                       server_default=false())
    #: the bytes and the documents the bucket may hold (its pending, held and ready ones)
    quota_bytes: Mapped[int | None] = mapped_column(BigInteger)
    quota_objects: Mapped[int | None] = mapped_column(BigInteger)
    #: the canned ACL: who reads (and writes) the bucket without a credential (``private``,
    #: ``public-read``, ``public-read-write``, ``authenticated-read``; docs/buckets.md)
    acl: Mapped[str] = mapped_column(String(32), nullable=False, default="private",
                                     server_default="private")
    #: the S3 access key that created the bucket (None: created another way, owned by none)
    owner: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)


class DocumentRow(Base):
    __tablename__ = table_name("documents")

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: the bucket the document lives in: its name is unique within it. The foreign key
    #: is the fence between a create and the bucket's deletion: C1 into a bucket deleted
    #: since its writer looked it up is refused by the database, and a bucket is not
    #: deleted while a create's pending document is in it, committed or not.
    bucket: Mapped[str] = mapped_column(
        String(63), ForeignKey(BucketRow.name, name=f"fk_{table_name('documents')}_bucket",
                               ondelete="RESTRICT"),
        nullable=False, default=DEFAULT_BUCKET, server_default=DEFAULT_BUCKET)
    name: Mapped[str] = mapped_column(String(1024), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False)
    blob_name: Mapped[str] = mapped_column(String(1024), nullable=False, index=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    size: Mapped[int | None] = mapped_column(BigInteger)
    content_type: Mapped[str] = mapped_column(String(255), nullable=False)
    sha256: Mapped[str | None] = mapped_column(String(64))
    md5: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    updated_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    #: C4 makes this creation ``held`` rather than ``ready`` (decided at C1: asked by its
    #: writer or by the settings' hold policy; see ``protocol/held.py``)
    hold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False,
                                       server_default=false())
    #: who wrote the document (a digest of its token, ``api.auth.owner_of``), or None: the
    #: one caller told a held document's state
    owner: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        UniqueConstraint("bucket", "name", name=f"uq_{table_name('documents')}_bucket_name"),
        Index(index_name("documents", "bucket_status_name"), "bucket", "status", "name"),
    )


class BlobRow(Base):
    __tablename__ = table_name("blobs")

    name: Mapped[str] = mapped_column(String(1024), primary_key=True)
    # The document the blob belongs to; NULL for an attachment (its owner is below).
    document_id: Mapped[str | None] = mapped_column(String(32), index=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    content_type: Mapped[str] = mapped_column(String(255), nullable=False)
    size: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    md5: Mapped[str | None] = mapped_column(String(32))
    # The owner of a row: an upload attempt or a sweeper's claim, by a token of its own.
    # Every transition compares it (``transitions/``); the lease says until when the
    # owner may not be displaced. A row in ``committed`` has no owner (NULL).
    attempt: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    changed_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    # An attachment's owner, set by A4 in the application's transaction: the owner row's
    # table, its primary key as text, and the column that holds the reference.
    owner_table: Mapped[str | None] = mapped_column(String(255))
    owner_key: Mapped[str | None] = mapped_column(String(255))
    owner_column: Mapped[str | None] = mapped_column(String(255))
    filename: Mapped[str | None] = mapped_column(String(1024))
    # With the deferred retag (``BLOBLEDGER_RETAG=deferred``): when C4/R4 committed the row
    # while its blob was still tagged ``pending``; the retag worker clears it once the blob
    # is tagged ``committed``. NULL: no retag owed.
    retag_due: Mapped[datetime | None] = mapped_column(DateTime())

    __table_args__ = (
        Index(index_name("blobs", "state_changed"), "state", "changed_at"),
        Index(index_name("blobs", "retag_due"), "retag_due"),
        Index(index_name("blobs", "owner"), "owner_table", "owner_key", "owner_column"),
    )


class KeyState(StrEnum):
    PENDING = "pending"  # the create under this key is in flight (its intent is ``blob_name``)
    DONE = "done"  # the create finished; ``response`` is what it answered


class IdempotencyKeyRow(Base):
    """One idempotency key: the intent it started, then the first response, kept until
    ``expires_at`` (the retention, counted from the response)."""

    __tablename__ = table_name("idempotency_keys")

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    blob_name: Mapped[str] = mapped_column(String(1024), nullable=False, index=True)
    document_id: Mapped[str] = mapped_column(String(32), nullable=False)
    name: Mapped[str | None] = mapped_column(String(1024))
    content_type: Mapped[str] = mapped_column(String(255), nullable=False)
    sha256: Mapped[str | None] = mapped_column(String(64))
    response: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime())

    __table_args__ = (
        Index(index_name("idempotency_keys", "state_expires"), "state", "expires_at"),
    )


class UploadState(StrEnum):
    OPEN = "open"  # parts are being received; ``offset`` bytes are stored for good
    DONE = "done"  # completed: the document exists (``document_id``); nothing more is written


class UploadMode(StrEnum):
    TUS = "tus"  # resumable: parts through ``serve`` (``/files/``)
    DIRECT = "direct"  # the client puts the bytes itself (``/uploads``)
    S3 = "s3"  # an S3 multipart upload through the S3 endpoint (its parts: ``s3_parts``)


class UploadRow(Base):
    """A resumable (tus) or direct upload: an intent that outlives one request. Its blob row
    (``blob_name``, pending, owned by ``attempt``, leased until ``expires_at``) is created
    with it (C1);
    ``offset`` is the number of bytes stored as committed parts (``parts``: their ids in
    order, JSON), advanced only by compare-and-set (``transitions.record_parts``);
    ``owner`` names the token that created it (a digest), for the per-token limits."""

    __tablename__ = table_name("uploads")
    __table_args__ = (Index(index_name("uploads", "owner_state"), "owner", "state"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16), nullable=False)  # UploadMode
    blob_name: Mapped[str] = mapped_column(String(1024), nullable=False, unique=True)
    document_id: Mapped[str] = mapped_column(String(32), nullable=False)
    attempt: Mapped[str] = mapped_column(String(32), nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    length: Mapped[int] = mapped_column(BigInteger, nullable=False)
    offset: Mapped[int] = mapped_column(BigInteger, nullable=False)
    handle: Mapped[str] = mapped_column(String(1024), nullable=False)
    parts: Mapped[str] = mapped_column(Text, nullable=False)
    meta: Mapped[str] = mapped_column(Text, nullable=False)
    # what the service hashed from the stored bytes, recorded before C3 (never the client's)
    sha256: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    changed_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    #: a digest of the bearer token that created the upload (never the token), or None
    owner: Mapped[str | None] = mapped_column(String(64))


class EventType(StrEnum):
    """What an event says happened (written by the change itself, in its transaction)."""

    READY = "document.ready"
    REPLACED = "document.replaced"
    DELETED = "document.deleted"
    REJECTED = "document.rejected"  # a held document a processor rejected (never ready)
    ATTACHED = "attachment.attached"
    DETACHED = "attachment.detached"


class EventState(StrEnum):
    PENDING = "pending"  # not yet delivered to every target (or claimed by a worker now)
    DELIVERED = "delivered"  # every target answered yes
    DEAD = "dead"  # ``attempts`` reached the maximum: left for ``blobledger events replay``


class EventRow(Base):
    """One event: written in the transaction of the change it describes (the outbox of
    :mod:`blobledger.protocol.events`), delivered at least once by the delivery worker.
    ``id`` orders them; ``event_id`` is the ``webhook-id`` (the same on every retry);
    ``subject`` is what they are ordered by (a document's id; an attachment's blob name).
    ``attempt``/``lease_until`` are a delivery worker's claim, like a sweeper's on a blob."""

    __tablename__ = table_name("events")

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(40), nullable=False, unique=True)
    type: Mapped[str] = mapped_column(String(32), nullable=False)
    subject: Mapped[str] = mapped_column(String(1024), nullable=False)
    document_id: Mapped[str | None] = mapped_column(String(32))
    blob_name: Mapped[str | None] = mapped_column(String(1024))
    owner_table: Mapped[str | None] = mapped_column(String(255))
    owner_key: Mapped[str | None] = mapped_column(String(255))
    owner_column: Mapped[str | None] = mapped_column(String(255))
    version: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str | None] = mapped_column(String(1024))
    size: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64))
    md5: Mapped[str | None] = mapped_column(String(32))
    content_type: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    payload: Mapped[str] = mapped_column(Text, nullable=False)
    state: Mapped[str] = mapped_column(String(16), nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    attempt: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime())
    last_error: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        Index(index_name("events", "state_next"), "state", "next_attempt_at"),
        Index(index_name("events", "subject_id"), "subject", "id"),
    )


class DeliveryRow(Base):
    """One delivery attempt of one event to one target (a webhook URL, an in-process
    handler): the attempt log ``blobledger events show`` prints."""

    __tablename__ = table_name("event_deliveries")

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(40), nullable=False, index=True)
    attempt_no: Mapped[int] = mapped_column(Integer, nullable=False)
    target: Mapped[str] = mapped_column(String(1024), nullable=False)
    claim: Mapped[str | None] = mapped_column(String(32))
    started_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    ended_at: Mapped[datetime | None] = mapped_column(DateTime())
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)  # ok, failed
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
class WorkState(StrEnum):
    PENDING = "pending"  # the processor has not given its verdict yet
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class ProcessingRow(Base):
    """One processor's work on one held document's version: the processing outbox. Claimed
    by a worker's token (``attempt``) until ``lease_until``, like the sweeper's claims; the
    verdict is recorded by compare-and-set on that token (``protocol/held.py``). A
    rejection's row stays (with ``owner`` and ``reason``) after its document went to the
    deletion path, so the writer can read why, until ``changed_at`` is older than the
    idempotency retention."""

    __tablename__ = table_name("processing")
    __table_args__ = (Index(index_name("processing", "state_lease"), "state", "lease_until"),)

    document_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    processor: Mapped[str] = mapped_column(String(64), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False)  # WorkState
    attempt: Mapped[str | None] = mapped_column(String(32))
    lease_until: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    reason: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(1024), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
    changed_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)


def utcnow() -> datetime:
    """Naive UTC now, the form stored in the database."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime from a stored naive one."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class ServiceKeyRow(Base):
    """A secret the service keeps for itself, generated once (``protocol/keys.py``) and
    shared by every process of the deployment through the database: the key that signs the
    service's own read URLs unless ``BLOBLEDGER_SIGNING_KEY`` sets one. Never sent to a
    client."""

    __tablename__ = table_name("service_keys")

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(), nullable=False)
