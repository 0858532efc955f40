"""blobledger: a database and an object store, kept consistent through every crash.

    from blobledger import Ledger
    async with Ledger.from_urls("sqlite:///var/app.db", "file:///var/blobs") as ledger:
        doc = await ledger.create("report.pdf", data, content_type="application/pdf")
"""

import importlib as _importlib
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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


#: names loaded on first use (PEP 562): the database and storage layers weigh most of an
#: import, and the client and the CLI's client commands need neither
_LAZY = {"Document": "blobledger.protocol.documents", "Ledger": "blobledger.protocol.ledger"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'blobledger' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
