"""Stores: the contract (:mod:`.base`) and the backends, chosen by URL."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from blobledger._base import extras
from blobledger.config import Settings
from blobledger.errors import ConfigError
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    Condition,
    DeleteOutcome,
    Store,
    UncommittedInfo,
)

__all__ = [
    "BlobInfo", "BlobReader", "Condition", "DeleteOutcome", "Store", "UncommittedInfo",
    "open_store",
]


def check_store_url(url: str) -> tuple[str, str, str]:
    """The store URL's kind (``file``, ``azure``, ``s3``), its folder, container or bucket,
    and its prefix (S3); ConfigError, the message every command gives, otherwise. Nothing
    is opened nor created."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = unquote(parts.netloc + parts.path) if parts.netloc == "." else unquote(parts.path)
        if not path:
            raise ConfigError(f"store URL {url!r} names no folder (file:///path)")
        return "file", path, ""
    if parts.scheme == "azure":
        return "azure", parts.netloc, ""
    if parts.scheme == "s3":
        if not parts.netloc:
            raise ConfigError(f"store URL {url!r} names no bucket (s3://bucket[/prefix])")
        return "s3", parts.netloc, unquote(parts.path)
    raise ConfigError(
        f"unsupported store URL {url!r}: use file:///path, azure://<container> or "
        "s3://bucket[/prefix]"
    )


def open_store(url: str, settings: Settings | None = None, *, create: bool = True) -> Store:
    """The backend for ``file:///path``, ``azure://container`` or ``s3://bucket[/prefix]``;
    ConfigError otherwise, and for a backend whose extra is not installed (one line naming
    it: ``pip install 'blobledger[azure]'``). Each backend's SDK is imported here, on first
    use, never by the core. ``create``: a local store's folder is made if missing (False:
    a missing folder is a ConfigError, for commands that only inspect a store)."""
    kind, where, prefix = check_store_url(url)
    missing = extras.store_problem(url)  # before the backend's SDK is imported
    if missing is not None:
        raise ConfigError(missing)
    settings = settings or Settings()
    if kind == "file":
        from blobledger.stores.local import LocalStore

        return LocalStore(where, create=create)
    if kind == "azure":
        from blobledger.stores.azure import AzureStore

        return AzureStore.from_settings(where, settings)
    from blobledger.stores.s3 import S3Store

    return S3Store.from_settings(where, prefix, settings)
