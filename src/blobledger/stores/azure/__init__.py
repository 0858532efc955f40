"""The Azure Blob backend (``azure://<container>``): the store (:mod:`.store`, with its
reads in :mod:`.reads`, its conditioned writes in :mod:`.conditions`, its single put and
retag sent as requests of their own in :mod:`.lean`), its SDK error
mapping (:mod:`.errors`), its doctor (:mod:`.doctor`), its lifecycle policy
(:mod:`.lifecycle`) and its settings (:mod:`.settings`). The store and the SDK load on
first use: importing the settings alone does not import the Azure SDK."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blobledger.stores.azure.conditions import CREATE_ONLY, NO_COMMITTED_BLOB, tag_condition
    from blobledger.stores.azure.errors import map_errors, translate
    from blobledger.stores.azure.store import BLOCK_SIZE, SINGLE_PUT_LIMIT, AzureStore

__all__ = ["BLOCK_SIZE", "CREATE_ONLY", "NO_COMMITTED_BLOB", "SINGLE_PUT_LIMIT", "AzureStore",
           "map_errors", "tag_condition", "translate"]


#: where each name lives: the store, the conditions it sends, its SDK error mapping
_HOMES = {"BLOCK_SIZE": "store", "SINGLE_PUT_LIMIT": "store", "AzureStore": "store",
          "CREATE_ONLY": "conditions", "NO_COMMITTED_BLOB": "conditions",
          "tag_condition": "conditions", "map_errors": "errors", "translate": "errors"}


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(f"blobledger.stores.azure.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
