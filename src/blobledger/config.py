"""Configuration: every setting, its environment variable and its default, in one place.

=================================  ==============================  =========================
variable                           meaning                         default
=================================  ==============================  =========================
BLOBLEDGER_DATABASE_URL            sqlite:///… or postgresql://…   sqlite:///./var/blobledger.db
BLOBLEDGER_STORE_URL               file:///path or azure://cont.   file://./var/blobs
BLOBLEDGER_AZURE_CONNECTION_STRING connection string (azure://)    unset
BLOBLEDGER_AZURE_ACCOUNT_URL       account URL, with DefaultAzureCredential
BLOBLEDGER_BLOB_PREFIX             prefix of every blob name       documents
BLOBLEDGER_MAX_UPLOAD_BYTES        largest accepted upload         5GiB
BLOBLEDGER_UPLOAD_DEADLINE         an upload is aborted after      1h
BLOBLEDGER_SWEEP_AFTER             pending rows older are stale    2h
BLOBLEDGER_DELETE_GRACE            wait before deleting old blobs  5m
BLOBLEDGER_BODY_TIMEOUT            an upload silent this long: 408 1m
BLOBLEDGER_HEADER_TIMEOUT          a request head must be complete 10s
BLOBLEDGER_KEEP_ALIVE_TIMEOUT      an idle kept-alive connection   5s
BLOBLEDGER_MAX_CONNECTIONS         open connections (serve)        1000
BLOBLEDGER_MAX_UPLOADS             concurrent uploads: 503 beyond  100
BLOBLEDGER_API_TOKENS              ``token:read,token2:write``     unset
=================================  ==============================  =========================

``sweep_after`` must exceed ``upload_deadline`` by at least :data:`SWEEP_MARGIN` (and by 10%):
an upload still running when the sweeper judges its row stale would race the sweeper.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from blobledger.durations import format_duration, parse_duration, parse_size
from blobledger.errors import ConfigError
from blobledger.names import check_prefix

SWEEP_MARGIN = 60.0
DEFAULT_DATABASE_URL = "sqlite:///./var/blobledger.db"
DEFAULT_STORE_URL = "file://./var/blobs"


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    store_url: str = DEFAULT_STORE_URL
    azure_connection_string: str | None = None
    azure_account_url: str | None = None
    s3_endpoint_url: str | None = None
    s3_region: str | None = None
    s3_path_style: bool = False
    blob_prefix: str = "documents"
    max_upload_bytes: int = 5 * 1024**3
    upload_deadline: float = 3600.0
    sweep_after: float = 7200.0
    delete_grace: float = 300.0
    body_timeout: float = 60.0
    idempotency_retention: float = 86400.0
    header_timeout: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 1000
    max_uploads: int = 100
    api_tokens: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Alembic's version table for the ledger's migrations; None: ``alembic_version`` on the
    #: ledger's own engine, ``blobledger_version`` on an application's (``Ledger.from_engine``)
    version_table: str | None = None
    #: the layout of the ledger's tables (``BLOBLEDGER_TABLE_PREFIX``, ``BLOBLEDGER_DB_SCHEMA``);
    #: fixed when blobledger is imported (``blobledger.models``), so these only state what a
    #: ledger expects: None accepts the imported layout, anything else must equal it
    table_prefix: str | None = None
    db_schema: str | None = None

    def __post_init__(self) -> None:
        check_prefix(self.blob_prefix)
        if self.max_upload_bytes <= 0:
            raise ConfigError("BLOBLEDGER_MAX_UPLOAD_BYTES must be positive")
        if self.upload_deadline <= 0:
            raise ConfigError("BLOBLEDGER_UPLOAD_DEADLINE must be positive")
        if self.body_timeout <= 0:
            raise ConfigError("BLOBLEDGER_BODY_TIMEOUT must be positive")
        if self.idempotency_retention <= 0:
            raise ConfigError("BLOBLEDGER_IDEMPOTENCY_RETENTION must be positive")
        for env, value in (("BLOBLEDGER_HEADER_TIMEOUT", self.header_timeout),
                           ("BLOBLEDGER_KEEP_ALIVE_TIMEOUT", self.keep_alive_timeout),
                           ("BLOBLEDGER_MAX_CONNECTIONS", self.max_connections),
                           ("BLOBLEDGER_MAX_UPLOADS", self.max_uploads)):
            if value <= 0:
                raise ConfigError(f"{env} must be positive")
        if self.delete_grace < 0:
            raise ConfigError("BLOBLEDGER_DELETE_GRACE must not be negative")
        required = minimum_sweep_after(self.upload_deadline)
        if self.sweep_after < required:
            raise ConfigError(
                f"BLOBLEDGER_SWEEP_AFTER ({format_duration(self.sweep_after)}) must exceed "
                f"BLOBLEDGER_UPLOAD_DEADLINE ({format_duration(self.upload_deadline)}) by a "
                f"margin: at least {format_duration(required)}"
            )

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]


def sweep_margin(upload_deadline: float) -> float:
    """The margin kept past an upload's deadline before its intent counts as dead: a
    minute, or a tenth of the deadline if that is longer. The sweeper keeps at least this
    (``sweep_after``); a retry waits this long past a dead attempt's lease."""
    return max(SWEEP_MARGIN, upload_deadline * 0.1)


def minimum_sweep_after(upload_deadline: float) -> float:
    """The smallest ``sweep_after`` allowed for an upload deadline."""
    return upload_deadline + sweep_margin(upload_deadline)


def parse_tokens(text: str) -> dict[str, frozenset[str]]:
    """``tok1:read,tok2:write,tok3:read+write`` → {token: scopes}; write implies read."""
    tokens: dict[str, frozenset[str]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        token, sep, scope_text = item.rpartition(":")
        if not sep or not token:
            raise ConfigError(f"BLOBLEDGER_API_TOKENS: {item[:4]}… needs a scope (TOKEN:read)")
        scopes = set(scope_text.split("+"))
        if not scopes <= {"read", "write"}:
            raise ConfigError(f"BLOBLEDGER_API_TOKENS: unknown scope in {scope_text!r}")
        if "write" in scopes:
            scopes.add("read")
        tokens[token] = frozenset(scopes)
    return tokens


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment (``os.environ`` unless given)."""
    env = os.environ if env is None else env

    def get(key: str) -> str | None:
        value = env.get(key)
        return value if value not in (None, "") else None

    values: dict[str, object] = {}
    if (v := get("BLOBLEDGER_DATABASE_URL")) is not None:
        values["database_url"] = v
    if (v := get("BLOBLEDGER_STORE_URL")) is not None:
        values["store_url"] = v
    values["azure_connection_string"] = get("BLOBLEDGER_AZURE_CONNECTION_STRING")
    values["azure_account_url"] = get("BLOBLEDGER_AZURE_ACCOUNT_URL")
    values["s3_endpoint_url"] = get("BLOBLEDGER_S3_ENDPOINT_URL")
    values["s3_region"] = get("BLOBLEDGER_S3_REGION") or get("AWS_REGION") \
        or get("AWS_DEFAULT_REGION")
    if (v := get("BLOBLEDGER_S3_ADDRESSING")) is not None:
        if v not in ("path", "virtual", "auto"):
            raise ConfigError("BLOBLEDGER_S3_ADDRESSING must be path, virtual or auto")
        values["s3_path_style"] = v == "path"
    if (v := get("BLOBLEDGER_BLOB_PREFIX")) is not None:
        values["blob_prefix"] = v
    if (v := get("BLOBLEDGER_MAX_UPLOAD_BYTES")) is not None:
        values["max_upload_bytes"] = parse_size(v, what="BLOBLEDGER_MAX_UPLOAD_BYTES")
    for key, attr in (
        ("BLOBLEDGER_UPLOAD_DEADLINE", "upload_deadline"),
        ("BLOBLEDGER_SWEEP_AFTER", "sweep_after"),
        ("BLOBLEDGER_DELETE_GRACE", "delete_grace"),
        ("BLOBLEDGER_BODY_TIMEOUT", "body_timeout"),
        ("BLOBLEDGER_IDEMPOTENCY_RETENTION", "idempotency_retention"),
        ("BLOBLEDGER_HEADER_TIMEOUT", "header_timeout"),
        ("BLOBLEDGER_KEEP_ALIVE_TIMEOUT", "keep_alive_timeout"),
    ):
        if (v := get(key)) is not None:
            values[attr] = parse_duration(v, what=key)
    for key, attr in (("BLOBLEDGER_MAX_CONNECTIONS", "max_connections"),
                      ("BLOBLEDGER_MAX_UPLOADS", "max_uploads")):
        if (v := get(key)) is not None:
            if not (v.strip().isascii() and v.strip().isdigit()):
                raise ConfigError(f"{key}: {v!r} is not a whole number")
            values[attr] = int(v.strip())
    if (v := get("BLOBLEDGER_VERSION_TABLE")) is not None:
        values["version_table"] = v
    values["table_prefix"] = env.get("BLOBLEDGER_TABLE_PREFIX", "").strip()
    values["db_schema"] = get("BLOBLEDGER_DB_SCHEMA")
    if (v := get("BLOBLEDGER_API_TOKENS")) is not None:
        values["api_tokens"] = parse_tokens(v)
    return Settings(**values)  # type: ignore[arg-type]


def default_var_dir() -> Path:
    return Path("./var")
