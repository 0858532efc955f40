"""Stores: the contract (:mod:`.base`) and the backends, chosen by URL."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from blobledger.errors import ConfigError
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    Condition,
    DeleteOutcome,
    Store,
    UncommittedInfo,
)

if TYPE_CHECKING:  # the settings import the backends' settings models from this package
    from blobledger.config import Settings

__all__ = [
    "BlobInfo", "BlobReader", "Condition", "DeleteOutcome", "Store", "UncommittedInfo",
    "open_store",
]


def open_store(url: str, settings: Settings | None = None) -> Store:
    """The backend for ``file:///path``, ``azure://container`` or ``s3://bucket[/prefix]``;
    ConfigError otherwise."""
    from blobledger.config import Settings

    settings = settings or Settings()
    parts = urlsplit(url)
    if parts.scheme == "file":
        from blobledger.stores.local import LocalStore

        path = unquote(parts.netloc + parts.path) if parts.netloc == "." else unquote(parts.path)
        if not path:
            raise ConfigError(f"store URL {url!r} names no folder (file:///path)")
        return LocalStore(path)
    if parts.scheme == "azure":
        from blobledger.stores.azure import AzureStore

        return AzureStore.from_settings(parts.netloc, settings)
    if parts.scheme == "s3":
        from blobledger.stores.s3 import S3Store

        if not parts.netloc:
            raise ConfigError(f"store URL {url!r} names no bucket (s3://bucket[/prefix])")
        return S3Store.from_settings(parts.netloc, unquote(parts.path), settings)
    raise ConfigError(
        f"unsupported store URL {url!r}: use file:///path, azure://<container> or "
        "s3://bucket[/prefix]"
    )
