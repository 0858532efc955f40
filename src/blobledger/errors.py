"""Every error blobledger raises, in one flat file.

    BlobLedgerError
    ├── ConfigError            configuration is missing, malformed or unsafe
    │   ├── DatabaseMissing    the database named does not exist (also DatabaseUnavailable)
    │   ├── StoreMissing       the store named does not exist (also StoreUnavailable)
    │   └── AccessRefused      the database or the store refused the configured credentials
    ├── DatabaseUnavailable    the database could not be reached or timed out (retry later)
    ├── InvalidInput           an argument is not acceptable (a ValueError)
    │   └── InvalidName        a document name (or blob name) is not acceptable
    ├── NameTaken              a live document already has that name
    ├── QuotaExceeded          one token holds as many open uploads or names as allowed
    ├── NotFound               no ready document with that id
    │   └── UploadGone         a resumable upload that expired, was terminated or swept
    ├── PreconditionFailed     the expected version no longer matches
    ├── IdempotencyConflict    an idempotency key reused with other bytes or another name
    ├── IdempotencyInProgress  an attempt under that idempotency key is still running
    ├── OffsetMismatch         a resumable upload's part does not start at its stored offset
    ├── IntegrityError         bytes do not match the checksum they were sent with
    ├── UploadTooLarge         the body passed the configured maximum
    ├── UploadAborted          the upload ran past its deadline or its source failed
    │   └── IntentLost         the upload's intent was taken over (swept or resumed) meanwhile
    │       └── AttachLost     A4 lost: the staged blob was swept before a flush attached it
    ├── StoreUnavailable       the store could not be reached or answered 5xx (retry later)
    ├── SweeperBusy            another sweeper holds the SQLite database's sweep lock
    ├── ServiceError           an error answer of the service no other error names (a client's)
    └── StoreError             a storage answer the caller can act on
        ├── BlobAlreadyExists  create-only put refused: the name is taken (409 or 412)
        ├── BlobNotFound       no committed blob of that name
        └── ConditionNotMet    a tag condition did not hold (the guard refused)

Third-party errors are translated to these at one place per backend (``map_errors`` in
``stores/azure/errors.py`` and ``stores/s3/errors.py``); nothing above the store layer sees
an SDK error.
"""

from __future__ import annotations

from dataclasses import dataclass


class BlobLedgerError(Exception):
    """Base of every error raised by blobledger."""


class ConfigError(BlobLedgerError):
    """Raised when configuration is missing, malformed, unreachable or unsafe."""


class AccessRefused(ConfigError):
    """Raised when the database or the store answers but refuses the configured credentials:
    a PostgreSQL role that does not exist or a wrong password, a wrong Azure account key or
    SAS, S3 keys that are refused or lack a permission. A configuration mistake, not an
    outage: waiting does not help."""


class DatabaseUnavailable(BlobLedgerError):
    """Raised when the database cannot be reached, refuses connections or times out."""


class DatabaseMissing(ConfigError, DatabaseUnavailable):
    """Raised when the database named does not exist: a PostgreSQL server that answers but
    has no such database, or a SQLite file that was not to be created. A configuration
    mistake, not an outage (it is a DatabaseUnavailable too, for code that waits on one)."""


class InvalidInput(BlobLedgerError, ValueError):
    """Raised when an argument (a content type, a key, a range, a prefix) is not acceptable."""


class InvalidName(InvalidInput):
    """Raised when a name is empty, too long, or holds control characters or traversal."""


class NameTaken(BlobLedgerError):
    """Raised when a live document (pending or ready) already holds the name."""


class QuotaExceeded(BlobLedgerError):
    """Raised when one token already holds as many open uploads (``kind``
    ``too-many-open-uploads``) or reserved names (``too-many-reserved-names``) as allowed."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind


class BucketQuotaExceeded(QuotaExceeded):
    """Raised when a write would take a bucket past its quota (bytes or documents)."""

    def __init__(self, detail: str) -> None:
        super().__init__("bucket-quota-exceeded", detail)


class NotFound(BlobLedgerError, LookupError):
    """Raised when no ready document has the id (pending documents are invisible)."""


class BucketNotFound(NotFound):
    """Raised when no bucket has the name (or the caller's credential does not reach it)."""


class BucketExists(BlobLedgerError):
    """Raised when a bucket of that name exists already."""


class BucketNotEmpty(BlobLedgerError):
    """Raised when a bucket to delete still holds documents (pending, held or ready)."""


class BucketForbidden(BlobLedgerError):
    """Raised when the caller's credential is limited to other buckets."""


class ContentTypeRefused(InvalidInput):
    """Raised when a bucket does not allow the media type of a write."""


class UploadGone(NotFound):
    """Raised when a resumable upload expired, was terminated or was swept."""


class OffsetMismatch(BlobLedgerError):
    """Raised when a part of a resumable upload does not start at the offset stored for it,
    or the upload is complete (nothing is ever written to it again)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class PreconditionFailed(BlobLedgerError):
    """Raised when the expected version does not match the document's current version."""

    def __init__(self, message: str, current_version: int | None = None) -> None:
        super().__init__(message)
        self.current_version = current_version


class IdempotencyConflict(BlobLedgerError):
    """Raised when an idempotency key is reused with different bytes or a different name."""


class IdempotencyInProgress(BlobLedgerError):
    """Raised when an earlier attempt under the same idempotency key is still running."""


class IntegrityError(BlobLedgerError):
    """Raised when received bytes do not match the expected checksum; nothing is stored."""


class UploadTooLarge(BlobLedgerError):
    """Raised when an upload passes the configured maximum size; nothing is published."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"upload exceeds the limit of {limit} bytes")
        self.limit = limit


class UploadAborted(BlobLedgerError):
    """Raised when an upload passed its deadline or its byte source failed mid-stream."""


class IntentLost(UploadAborted):
    """Raised when a writer finds that its intent is no longer its own (a sweeper or a retry
    took it over while it was paused); nothing of this attempt became visible. Retry."""


class AttachLost(IntentLost):
    """Raised (from the flush) when A4 loses: the staged blob was fenced by the sweeper, or
    attached elsewhere, before this transaction attached it. The transaction fails and
    nothing of it becomes visible; stage the bytes again and retry."""


class StoreUnavailable(BlobLedgerError):
    """Raised when the store is unreachable, timed out or answered 5xx; safe to retry."""


class StoreMissing(ConfigError, StoreUnavailable):
    """Raised when the store named does not exist: a container or a bucket, or a local
    store's folder that was not to be created. A configuration mistake, not an outage (it
    is a StoreUnavailable too, for code that waits on one)."""


class SweeperBusy(BlobLedgerError):
    """Raised when another sweeper already runs on a database that allows only one (SQLite)."""


class ServiceError(BlobLedgerError):
    """Raised by :mod:`blobledger.client` for an error answer that no other error names
    (or whose body is not a problem document); ``status`` is its HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class StoreError(BlobLedgerError):
    """Base of the storage answers a caller can act on."""


@dataclass(frozen=True)
class Digests:
    """What a put computed while streaming."""

    size: int
    md5: str
    sha256: str


class BlobAlreadyExists(StoreError, FileExistsError):
    """Raised when a create-only put finds the name taken (HTTP 409 or 412 alike).

    ``computed`` holds the digests of the bytes this put streamed, so a caller can
    compare them with the stored blob's and decide whether its own retry already won.
    """

    def __init__(self, name: str, computed: Digests | None = None) -> None:
        super().__init__(f"blob already exists: {name}")
        self.name = name
        self.computed = computed


class BlobNotFound(StoreError, FileNotFoundError):
    """Raised when a blob does not exist (uncommitted blocks do not count)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"blob not found: {name}")
        self.name = name


class ConditionNotMet(StoreError):
    """Raised when the store refused an operation because a tag condition did not hold."""

    def __init__(self, name: str, condition: str = "") -> None:
        super().__init__(f"condition not met on {name}" + (f": {condition}" if condition else ""))
        self.name = name
