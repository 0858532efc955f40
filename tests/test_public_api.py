"""The public names, pinned: what README.md and docs/ tell users to import.

A module with ``__all__`` is pinned exactly; the others must keep at least the names listed.
Everything else (``blobledger._base``, names with a leading underscore) is private. The old
flat paths of the modules that moved into the layer packages (never released) are gone.
"""

from __future__ import annotations

import importlib

import pytest

from blobledger.protocol.models import PENDING_TAG
from blobledger.stores.azure import conditions as azure_conditions

ERRORS = ["BlobAlreadyExists", "BlobLedgerError", "BlobNotFound", "ConditionNotMet",
          "ConfigError", "DatabaseUnavailable", "IdempotencyConflict", "IdempotencyInProgress",
          "IntegrityError", "IntentLost", "InvalidInput", "InvalidName", "NameTaken", "NotFound",
          "OffsetMismatch", "PreconditionFailed", "StoreError", "StoreUnavailable",
          "UploadAborted", "UploadGone", "UploadTooLarge"]

#: modules with ``__all__``: exactly these names
EXACT: dict[str, list[str]] = {
    "blobledger": sorted([*ERRORS, "Document", "Ledger"]),
    "blobledger.sqlalchemy": ["AttachLost", "Attachment", "AttachmentList", "AttachmentRef",
                              "StagedBlob", "StagedUpload", "has_many_attached",
                              "has_one_attached"],
    "blobledger.testing": ["StoreContract"],
    "blobledger.django": ["LedgerStorage"],
    "blobledger.stores": ["BlobInfo", "BlobReader", "Condition", "DeleteOutcome", "Store",
                          "UncommittedInfo", "open_store"],
    "blobledger.stores.azure": ["AzureStore", "BLOCK_SIZE", "CREATE_ONLY", "NO_COMMITTED_BLOB",
                                "SINGLE_PUT_LIMIT", "map_errors", "tag_condition", "translate"],
    "blobledger.stores.s3": ["S3Store", "map_errors", "translate"],
    "blobledger.api": ["create_app"],
    "blobledger.client": ["AsyncClient", "AsyncReading", "BadAnswer", "Client", "DocumentInfo",
                          "Link", "NoDirectUploads", "Page", "ReadURL", "Reading", "Refused",
                          "Retried", "StoreFailed"],
    "blobledger.protocol.migrate": ["EMBEDDED_VERSION_TABLE", "MIGRATIONS", "alembic_config",
                                    "ensure_schema", "migrate_database", "upgrade",
                                    "upgrade_within"],
}

#: modules without ``__all__``: at least these names (the documented ones)
AT_LEAST: dict[str, list[str]] = {
    "blobledger.errors": [*ERRORS, "AccessRefused", "AttachLost", "DatabaseMissing", "Digests",
                          "ServiceError", "StoreMissing", "SweeperBusy"],
    "blobledger.config": ["Settings", "load_settings", "from_env"],
    "blobledger.blocking": ["BlockingLedger"],
    "blobledger.stores.base": ["BlobInfo", "BlobReader", "Capabilities", "Condition",
                               "DeleteOutcome", "DirectPut", "Store", "UncommittedInfo"],
    "blobledger.stores.local": ["LocalStore"],
    "blobledger.stores.azure.settings": ["AzureSettings"],
    "blobledger.telemetry": ["enable", "disable", "span"],
    "blobledger.failpoints": ["configure", "FailpointError"],
    "blobledger.db": ["Database", "create_engine", "configure_sqlite"],
    "blobledger.protocol.ledger": ["Ledger"],
    "blobledger.protocol.transitions": ["Intent"],
    "blobledger.protocol.models": ["Base", "BlobRow", "DocumentRow", "BlobState"],
    "blobledger.workers.sweeper": ["Sweeper", "SweepReport", "sweep_forever",
                                   "SWEEP_INTERVAL_ENV"],
    "blobledger.workers.invariants": ["check", "InvariantReport", "Violation"],
    "blobledger.workers.delivery": ["Delivery", "DeliveryReport", "deliver_forever"],
    "blobledger.protocol.events": ["Event", "document_ready"],
}


@pytest.mark.parametrize("module", sorted(EXACT))
def test_all_is_pinned(module: str) -> None:
    assert sorted(importlib.import_module(module).__all__) == EXACT[module]


@pytest.mark.parametrize("module", sorted(AT_LEAST))
def test_documented_names_are_there(module: str) -> None:
    imported = importlib.import_module(module)
    assert [name for name in AT_LEAST[module] if not hasattr(imported, name)] == []


def test_the_ledger_is_one_class_at_every_public_path() -> None:
    from blobledger import Ledger
    from blobledger.protocol.ledger import Ledger as Moved

    assert Ledger is Moved


def test_the_azure_stores_pending_tag_is_the_protocols() -> None:
    """The stores sit below the protocol and keep their own copy of the pending tag."""
    assert azure_conditions.PENDING_TAG == PENDING_TAG


#: the flat module paths of an unreleased layout, and the stubs that forwarded them
GONE = ["blobledger.aio", "blobledger.attachments", "blobledger.clock", "blobledger.direct",
        "blobledger.doctor", "blobledger.documents", "blobledger.invariants",
        "blobledger.ledger", "blobledger.lifecycle", "blobledger.metrics", "blobledger.migrate",
        "blobledger.models", "blobledger.names", "blobledger.owners", "blobledger.reconciler",
        "blobledger.resumable", "blobledger.scan", "blobledger.stores.azure.doctor",
        "blobledger.stores.azure.lifecycle", "blobledger.stores.s3.doctor",
        "blobledger.stores.s3.lifecycle", "blobledger.sweeper", "blobledger.transitions",
        "blobledger._deprecated", "blobledger.workers.experiments"]


@pytest.mark.parametrize("old", GONE)
def test_the_old_flat_paths_are_gone(old: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_the_measured_cases_have_a_room_of_their_own() -> None:
    from blobledger.experiments import run_experiments

    assert run_experiments.__module__.startswith("blobledger.experiments.")


def test_nothing_private_is_exported() -> None:
    for module in EXACT:
        assert [n for n in importlib.import_module(module).__all__ if n.startswith("_")] == []
