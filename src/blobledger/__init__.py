"""blobledger: a database and an object store, kept consistent through every crash.

    from blobledger import Ledger
    async with Ledger.from_urls("sqlite:///var/app.db", "file:///var/blobs") as ledger:
        doc = await ledger.create("report.pdf", data, content_type="application/pdf")
"""

from importlib.metadata import version as _version

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
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger

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
#: the installed distribution's version: written once, in pyproject.toml; the OpenAPI
#: document, ``blobledger --version`` and the CLI's User-Agent all read it from here
__version__ = _version("blobledger")
