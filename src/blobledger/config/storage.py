"""Storage: the database, the store and the blobs' names (``BLOBLEDGER_DATABASE_URL``,
``BLOBLEDGER_STORE_URL``, the remote stores' ``BLOBLEDGER_AZURE_*`` and ``BLOBLEDGER_S3_*``
of :mod:`.backends`, ``BLOBLEDGER_BLOB_PREFIX``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from blobledger._base.names import check_prefix
from blobledger.config.backends import AzureSettings, S3Settings
from blobledger.config.fields import setting
from blobledger.errors import ConfigError

DEFAULT_DATABASE_URL = "sqlite:///./var/blobledger.db"
DEFAULT_STORE_URL = "file://./var/blobs"


class StorageSettings(BaseModel):
    """Where the ledger's rows and the blobs are kept."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = setting(
        DEFAULT_DATABASE_URL,
        "`sqlite:///path` or `postgresql://…` (the driver is chosen for you)")
    store_url: str = setting(
        DEFAULT_STORE_URL, "`file:///path`, `azure://<container>` or `s3://bucket[/prefix]`")
    azure: AzureSettings = AzureSettings()
    s3: S3Settings = S3Settings()
    blob_prefix: str = setting("documents", "prefix of every blob name")

    @field_validator("blob_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        try:
            return check_prefix(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None


def default_var_dir() -> Path:
    return Path("./var")
