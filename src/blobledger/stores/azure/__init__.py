"""The Azure Blob backend (``azure://<container>``): the store, its SDK error mapping, its
doctor (:mod:`.doctor`) and its lifecycle policy (:mod:`.lifecycle`)."""

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
