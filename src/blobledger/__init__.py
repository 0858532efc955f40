"""blobledger: a database and an object store, kept consistent through every crash.

    from blobledger import Ledger
    async with Ledger.from_urls("sqlite:///var/app.db", "file:///var/blobs") as ledger:
        doc = await ledger.create("report.pdf", data, content_type="application/pdf")
"""

from blobledger.documents import Document
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    DatabaseUnavailable,
    IdempotencyConflict,
    IdempotencyInProgress,
    IntegrityError,
    IntentLost,
    InvalidInput,
    InvalidName,
    NameTaken,
    NotFound,
    OffsetMismatch,
    PreconditionFailed,
    StoreError,
    StoreUnavailable,
    UploadAborted,
    UploadGone,
    UploadTooLarge,
)
from blobledger.ledger import Ledger

__all__ = [
    "BlobAlreadyExists",
    "BlobLedgerError",
    "BlobNotFound",
    "ConditionNotMet",
    "ConfigError",
    "DatabaseUnavailable",
    "Document",
    "IdempotencyConflict",
    "IdempotencyInProgress",
    "IntegrityError",
    "IntentLost",
    "InvalidInput",
    "InvalidName",
    "Ledger",
    "NameTaken",
    "NotFound",
    "OffsetMismatch",
    "PreconditionFailed",
    "StoreError",
    "StoreUnavailable",
    "UploadAborted",
    "UploadGone",
    "UploadTooLarge",
]
__version__ = "0.1.0"
