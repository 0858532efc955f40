"""The Azure Blob backend (``azure://<container>``): the store, its SDK error mapping, its
doctor (:mod:`.doctor`), its lifecycle policy (:mod:`.lifecycle`) and its settings
(:mod:`.settings`). The store and the SDK load on first use: importing the settings alone
does not import the Azure SDK."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blobledger.stores.azure.store import (
        BLOCK_SIZE,
        CREATE_ONLY,
        NO_COMMITTED_BLOB,
        SINGLE_PUT_LIMIT,
        AzureStore,
        map_errors,
        tag_condition,
        translate,
    )

__all__ = ["BLOCK_SIZE", "CREATE_ONLY", "NO_COMMITTED_BLOB", "SINGLE_PUT_LIMIT", "AzureStore",
           "map_errors", "tag_condition", "translate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("blobledger.stores.azure.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
