"""Configuration: one typed settings object for the library, the service and the workers.

:class:`Settings` is a frozen pydantic model: constructed in code with keyword arguments
(nothing read from anywhere), or by :func:`load_settings` from, highest priority first, the
environment, a ``.env`` file and a TOML file (``--config``), over the defaults. It is the
only reader of ``BLOBLEDGER_*``. Every mistake is reported at once, one readable line each
(:class:`~blobledger.errors.ConfigError`), naming where the value came from: the variable
(``BLOBLEDGER_UPLOAD_DEADLINE: …``), or the TOML file and the key
(``blobledger.toml: upload_deadline: …``, ``blobledger.toml: bogus_key is not a setting``).
The sources are pydantic-settings' own (environment, dotenv, ``TomlConfigSettingsSource``,
ordered by ``settings_customise_sources``); only their merge is kept here, to keep that
naming.

=================================  ==============================  =========================
variable                           meaning                         default
=================================  ==============================  =========================
BLOBLEDGER_DATABASE_URL            sqlite:///… or postgresql://…   sqlite:///./var/blobledger.db
BLOBLEDGER_STORE_URL               file:///path, azure://, s3://   file://./var/blobs
BLOBLEDGER_AZURE_*                 see blobledger.stores.azure.settings
BLOBLEDGER_S3_*                    see blobledger.stores.s3.settings
BLOBLEDGER_BLOB_PREFIX             prefix of every blob name       documents
BLOBLEDGER_MAX_UPLOAD_BYTES        largest accepted upload         5GiB
BLOBLEDGER_UPLOAD_DEADLINE         an upload is aborted after      1h
BLOBLEDGER_SWEEP_AFTER             pending rows older are stale    2h
BLOBLEDGER_DELETE_GRACE            wait before deleting old blobs  5m
BLOBLEDGER_READ_URL_EXPIRY         a signed read URL's lifetime    the grace less the skew
BLOBLEDGER_DOWNLOADS               ``proxy`` or ``redirect``       proxy
BLOBLEDGER_BODY_TIMEOUT            an upload silent this long: 408 1m
BLOBLEDGER_IDEMPOTENCY_RETENTION   idempotency keys are kept       1d
BLOBLEDGER_HEADER_TIMEOUT          a request head must be complete 10s
BLOBLEDGER_KEEP_ALIVE_TIMEOUT      an idle kept-alive connection   5s
BLOBLEDGER_MAX_CONNECTIONS         open connections (serve)        1000
BLOBLEDGER_MAX_UPLOADS             concurrent uploads: 503 beyond  100
BLOBLEDGER_MIN_BODY_RATE           slower bodies (bytes/s): 408    1KiB (0: no minimum)
BLOBLEDGER_BODY_RATE_WINDOW        the rate is judged over this    10s
BLOBLEDGER_MAX_OPEN_UPLOADS        open uploads of one token: 429  100
BLOBLEDGER_MAX_RESERVED_NAMES      names one token's uploads hold  20
BLOBLEDGER_API_TOKENS              ``token:read,token2:write``     unset
BLOBLEDGER_ALLOWED_HOSTS           ``Host`` names served (400 else) localhost, 127.0.0.1, ::1
BLOBLEDGER_CORS_ORIGINS            origins browsers may call from  unset (no CORS)
BLOBLEDGER_PUBLIC_URL              base of the URLs handed out     the address connected to
BLOBLEDGER_SIGNING_KEY             signs the service's read URLs   generated, kept in the db
BLOBLEDGER_SWEEP_INTERVAL          ``serve`` sweeps this often     1m (0: no sweeper)
BLOBLEDGER_WORKER_GRACE            a worker silent 2 intervals     1m
                                   plus this: ``/readyz`` 503
BLOBLEDGER_WEBHOOK_URLS            events are POSTed to these      unset (no webhooks)
BLOBLEDGER_WEBHOOK_SECRET          ``whsec_…``: signs them         unset
BLOBLEDGER_EVENT_MAX_ATTEMPTS      an event is dead after N fails  10
BLOBLEDGER_EVENT_BACKOFF           first retry after; doubles      5s (at most 1h apart)
BLOBLEDGER_EVENT_LEASE             a delivery worker's claim       1m
BLOBLEDGER_EVENT_BATCH             events claimed at once          100
BLOBLEDGER_EVENT_TIMEOUT           one webhook call's limit        10s
BLOBLEDGER_EVENT_INTERVAL          delivery polls this often       1s
BLOBLEDGER_HOLD                    ``asked`` or ``always``         asked (held when asked)
BLOBLEDGER_HOLD_PREFIXES           names under these are held      unset
BLOBLEDGER_PROCESSORS              ``content-type``, ``scan``      unset (none)
BLOBLEDGER_SCAN_COMMAND            the scanner's argv              unset
BLOBLEDGER_SCAN_URL                the scanner's HTTP endpoint     unset
BLOBLEDGER_SCAN_TIMEOUT            one scan may take               1m
BLOBLEDGER_PROCESSING_LEASE        a worker's claim on held work   10m
BLOBLEDGER_PROCESSING_ATTEMPTS     failed runs before a rejection  5
BLOBLEDGER_PROCESSING_INTERVAL     ``serve`` looks for held work   2s
BLOBLEDGER_RETAG                   ``inline`` or ``deferred``      inline
BLOBLEDGER_RETAG_INTERVAL          deferred: owed retags polled    1s
BLOBLEDGER_RETAG_WARN_AFTER        retag lag warned about beyond   5m
BLOBLEDGER_URL                     the service (client commands)   http://127.0.0.1:8000
BLOBLEDGER_TOKEN                   bearer token (client commands)  unset
BLOBLEDGER_OTEL                    OpenTelemetry spans             off
BLOBLEDGER_VARIANTS                derived images, ``thumb=256x256`` unset (none)
BLOBLEDGER_VARIANT_FORMAT          ``webp``, ``jpeg`` or ``png``   webp
BLOBLEDGER_VARIANT_QUALITY         lossy quality, 1-100            80
BLOBLEDGER_MAX_IMAGE_PIXELS        larger sources are refused      64000000
BLOBLEDGER_MAX_IMAGE_BYTES         larger sources are refused      64MiB
BLOBLEDGER_VARIANT_LEASE           a variant maker's claim lasts   1m
BLOBLEDGER_CLOCK_OFFSET            test hook: seconds ahead        0
BLOBLEDGER_FAILPOINTS              test hook: see failpoints       unset
=================================  ==============================  =========================

Held documents and processors: docs/pipeline.md.

Durations read ``90``, ``90s``, ``15m``, ``2h``, ``1d``; sizes ``1048576``, ``64MiB``, ``5GiB``.
``sweep_after`` must exceed ``upload_deadline`` by at least :data:`SWEEP_MARGIN` (and by 10%):
an upload still running when the sweeper judges its row stale would race the sweeper.
``delete_grace`` must be at least ``read_url_expiry`` plus :data:`CLOCK_SKEW`: a replaced or
deleted document's old blob outlives every signed read URL issued for it (docs/protocol.md).
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from blobledger._base import extras
from blobledger._base.durations import format_duration, parse_duration, parse_size, unit_of
from blobledger._base.hosts import (
    parse_allowed_host,
    parse_origin,
    parse_public_url,
    split_list,
)
from blobledger._base.names import check_prefix
from blobledger._base.redact import redact_url
from blobledger._base.variant_specs import VariantSpec, parse_variants
from blobledger.errors import ConfigError
from blobledger.stores.azure.settings import AzureSettings
from blobledger.stores.s3.settings import S3Settings

SWEEP_MARGIN = 60.0
#: how far the storage's clock (which ends a signed URL) and the database's (which ends a
#: grace) may disagree; the deletion grace covers a URL's lifetime plus this
CLOCK_SKEW = 60.0
DEFAULT_DATABASE_URL = "sqlite:///./var/blobledger.db"
DEFAULT_STORE_URL = "file://./var/blobs"
DEFAULT_URL = "http://127.0.0.1:8000"
ENV_PREFIX = "BLOBLEDGER_"
#: fields whose values are secrets: shown masked by ``blobledger config``
SECRET_FIELDS = frozenset({"api_tokens", "token", "azure.connection_string",
                           "webhook_secret", "signing_key"})
#: the shortest ``BLOBLEDGER_SIGNING_KEY`` accepted (characters)
SIGNING_KEY_MIN = 32
#: how a Standard Webhooks secret begins (the rest is base64)
WEBHOOK_SECRET_PREFIX = "whsec_"
#: the longest wait between two delivery attempts of one event
MAX_EVENT_BACKOFF = 3600.0
#: where the values being checked came from (:func:`load_settings`): named in the errors
_ORIGINS: ContextVar[Sequence[_Layer]] = ContextVar("blobledger_settings_origins", default=())


def _duration(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ConfigError:
            raise ValueError(f"{value!r} is not a duration (use e.g. 90, 90s, 15m, 2h)") \
                from None
    return value


def _size(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ConfigError:
            raise ValueError(f"{value!r} is not a size (use e.g. 1048576, 64MiB, 5GiB)") \
                from None
    return value


def _whole(value: object) -> object:
    if isinstance(value, str):
        if not (value.strip().isascii() and value.strip().isdigit()):
            raise ValueError(f"{value!r} is not a whole number")
        return int(value.strip())
    return value


def _tokens(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_tokens(value)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("BLOBLEDGER_API_TOKENS: ")) from None
    return value


def _seconds(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value.strip() or "0")
        except ValueError:
            raise ValueError(f"must be a number of seconds, not {value!r}") from None
    return value


def _variants(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_variants(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


def _hosts(value: object) -> object:
    return tuple(parse_allowed_host(item.lower()) for item in split_list(value))


def _origins(value: object) -> object:
    return tuple(dict.fromkeys(parse_origin(item) for item in split_list(value)))


def _webhook_urls(value: object) -> object:
    urls = tuple(dict.fromkeys(item.strip() for item in split_list(value)))
    for url in urls:
        if not url.startswith(("http://", "https://")) or len(url) > 1000:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
    return urls


def _webhook_secret(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        body = value.removeprefix(WEBHOOK_SECRET_PREFIX)
        try:
            key = base64.b64decode(body, validate=True)
        except (ValueError, binascii.Error):
            key = b""
        if not value.startswith(WEBHOOK_SECRET_PREFIX) or len(key) < 16:
            raise ValueError("must be whsec_ followed by at least 16 bytes in base64 "
                             "(e.g. whsec_ + `openssl rand -base64 32`)")
    return value
#: the processors that ship (``BLOBLEDGER_PROCESSORS``), in the order they are listed
PROCESSORS = ("content-type", "scan")


def _processors(value: object) -> object:
    names = tuple(dict.fromkeys(split_list(value)))
    unknown = [name for name in names if name not in PROCESSORS]
    if unknown:
        raise ValueError(f"unknown processor {unknown[0]!r} (known: {', '.join(PROCESSORS)})")
    return names


def _prefixes(value: object) -> object:
    return tuple(dict.fromkeys(split_list(value)))


def _public_url(value: object) -> object:
    if isinstance(value, str):
        return parse_public_url(value) if value.strip() else None
    return value


Duration = Annotated[float, BeforeValidator(_duration)]
Size = Annotated[int, BeforeValidator(_size)]
Count = Annotated[int, BeforeValidator(_whole)]
Tokens = Annotated[dict[str, frozenset[str]], BeforeValidator(_tokens)]
Hosts = Annotated[tuple[str, ...], BeforeValidator(_hosts)]
Origins = Annotated[tuple[str, ...], BeforeValidator(_origins)]
PublicUrl = Annotated[str | None, BeforeValidator(_public_url)]
WebhookUrls = Annotated[tuple[str, ...], BeforeValidator(_webhook_urls)]
WebhookSecret = Annotated[str | None, BeforeValidator(_webhook_secret)]


def _signing_key(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return None
        if len(value) < SIGNING_KEY_MIN:
            raise ValueError(f"must be at least {SIGNING_KEY_MIN} characters "
                             "(e.g. `openssl rand -hex 32`)")
    return value


SigningKey = Annotated[str | None, BeforeValidator(_signing_key)]
Processors = Annotated[tuple[str, ...], BeforeValidator(_processors)]
Prefixes = Annotated[tuple[str, ...], BeforeValidator(_prefixes)]
Variants = Annotated[dict[str, VariantSpec], BeforeValidator(_variants), PlainSerializer(
    lambda specs: ",".join(str(spec) for spec in specs.values()), when_used="json")]


class Settings(BaseModel):
    """Every setting, typed and checked; frozen (derive a changed copy with :meth:`with_`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    database_url: str = DEFAULT_DATABASE_URL
    store_url: str = DEFAULT_STORE_URL
    azure: AzureSettings = AzureSettings()
    s3: S3Settings = S3Settings()
    blob_prefix: str = "documents"
    max_upload_bytes: Size = 5 * 1024**3
    upload_deadline: Duration = 3600.0
    sweep_after: Duration = 7200.0
    delete_grace: Duration = 300.0
    #: how long a signed read URL opens its blob; None: ``delete_grace`` less CLOCK_SKEW
    read_url_expiry: Duration | None = None
    #: how ``GET /documents/{id}/content`` answers: streamed (proxy) or 307 to a signed URL
    downloads: Literal["proxy", "redirect"] = "proxy"
    body_timeout: Duration = 60.0
    idempotency_retention: Duration = 86400.0
    resumable_expiry: Duration = 86400.0  # how long a tus upload may take, all requests
    direct_upload_expiry: Duration = 3600.0  # how long a direct-upload URL stays valid
    header_timeout: Duration = 10.0
    keep_alive_timeout: Duration = 5.0
    max_connections: Count = 1000
    max_uploads: Count = 100
    #: a request body slower than this (bytes per second, judged over each
    #: ``body_rate_window`` the service spends waiting for it) is refused (408); 0: no minimum
    min_body_rate: Size = 1024
    body_rate_window: Duration = 10.0
    #: per token: uploads (tus and direct) created and not yet completed, expired or
    #: abandoned, and among them the document uploads, which each hold a name (429 beyond)
    max_open_uploads: Count = 100
    max_reserved_names: Count = 20
    api_tokens: Tokens = {}
    #: the ``Host`` names served (any port); empty: the loopback names. The host of
    #: ``public_url`` (or of the address a connection came in on) is always served
    allowed_hosts: Hosts = ()
    #: origins whose pages may call the service from a browser (CORS); empty: none
    cors_origins: Origins = ()
    #: the base of the URLs the service hands out; None: the address a connection came in on
    public_url: PublicUrl = None
    #: the key of the service's own read URLs and download links; None: one generated at
    #: first use and kept in the database (``service_keys``), shared by every instance
    signing_key: SigningKey = None
    #: ``serve`` sweeps (and runs the deletion path) this often; 0 or None: no sweeper in
    #: ``serve`` (another process runs ``blobledger sweep``)
    sweep_interval: Duration | None = 60.0
    #: a background worker of ``serve`` that has been down, or completed no run, for twice
    #: its interval plus this makes ``/readyz`` answer 503 naming it
    worker_grace: Duration = 60.0
    #: events are POSTed to these, signed per Standard Webhooks with ``webhook_secret``
    webhook_urls: WebhookUrls = ()
    webhook_secret: WebhookSecret = None
    #: an event whose delivery failed this many times is ``dead`` (``events replay``)
    event_max_attempts: Count = 10
    #: the wait after the first failed attempt; doubled after each (MAX_EVENT_BACKOFF at most)
    event_backoff: Duration = 5.0
    event_lease: Duration = 60.0
    event_batch: Count = 100
    event_timeout: Duration = 10.0
    event_interval: Duration = 1.0
    #: which creations are held until every processor accepted them: ``asked`` (those
    #: whose writer asks), ``always`` (every one); and those under ``hold_prefixes``
    hold: Literal["asked", "always"] = "asked"
    hold_prefixes: Prefixes = ()
    #: the processors a held document waits for (docs/pipeline.md)
    processors: Processors = ()
    #: the external scanner: a command (argv, shell-quoted; ``{path}`` for a temporary file,
    #: else the bytes on stdin) or an HTTP endpoint the bytes are POSTed to
    scan_command: str | None = None
    scan_url: str | None = None
    scan_timeout: Duration = 60.0
    #: how long a worker's claim on held work lasts (must exceed the scan's timeout)
    processing_lease: Duration = 600.0
    #: failed runs of one processor (errors, timeouts) before the document is rejected
    processing_attempts: Count = 5
    #: how often ``serve`` looks for held work (when processors are configured)
    processing_interval: Duration = 2.0
    #: where C3/R3 (the retag to ``committed``) happens: on the writer's path (``inline``),
    #: or after C4/R4 by the retag worker (``deferred``; docs/protocol.md)
    retag: Literal["inline", "deferred"] = "inline"
    #: deferred: how often ``serve``'s retag worker looks for owed retags (it is also woken
    #: by every C4/R4 of its own process)
    retag_interval: Duration = 1.0
    #: deferred: an owed retag older than this is warned about (``check``, ``doctor``); the
    #: lifecycle rule's age must be far beyond it (``lifecycle-policy``)
    retag_warn_after: Duration = 300.0
    url: str = DEFAULT_URL
    token: str | None = None
    otel: bool = False
    clock_offset: Annotated[float, BeforeValidator(_seconds)] = 0.0
    failpoints: str = ""
    #: Alembic's version table for the ledger's migrations; None: ``alembic_version`` on the
    #: ledger's own engine, ``blobledger_version`` on an application's (``Ledger.from_engine``)
    version_table: str | None = None
    #: the layout of the ledger's tables (``BLOBLEDGER_TABLE_PREFIX``, ``BLOBLEDGER_DB_SCHEMA``);
    #: fixed when blobledger is imported (``blobledger.models``), so these only state what a
    #: ledger expects: None accepts the imported layout, anything else must equal it
    table_prefix: str | None = None
    db_schema: str | None = None
    #: derived images (``GET /documents/{id}/variants/{name}``), by name; none by default
    variants: Variants = {}
    variant_format: Literal["webp", "jpeg", "png"] = "webp"
    variant_quality: Count = 80
    #: a source image with more pixels than this is refused (a decompression bomb)
    max_image_pixels: Count = 64_000_000
    #: a source image larger than this (bytes) is refused before it is read
    max_image_bytes: Size = 64 * 1024**2
    #: how long a variant maker's claim lasts; a request waiting for it takes over after
    variant_lease: Duration = 60.0

    _POSITIVE: ClassVar[tuple[str, ...]] = (
        "max_upload_bytes", "upload_deadline", "body_timeout", "idempotency_retention",
        "resumable_expiry", "direct_upload_expiry",
        "header_timeout", "keep_alive_timeout", "max_connections", "max_uploads",
        "body_rate_window", "max_open_uploads", "max_reserved_names", "event_max_attempts",
        "event_backoff", "event_lease", "event_batch", "event_timeout", "event_interval",
        "scan_timeout", "processing_lease", "processing_attempts", "processing_interval",
        "max_image_pixels", "max_image_bytes", "variant_lease", "retag_interval",
        "retag_warn_after", "worker_grace")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError("\n".join(describe_errors(exc, _ORIGINS.get()))) from None

    @field_validator("blob_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        try:
            return check_prefix(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator(*_POSITIVE)
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be positive")
        return value

    @field_validator("delete_grace", "min_body_rate")
    @classmethod
    def _not_negative(cls, value: float) -> float:
        if value < 0:
            raise ValueError("must not be negative")
        return value

    @field_validator("sweep_interval")
    @classmethod
    def _interval(cls, value: float | None) -> float | None:
        return value if value else None  # 0: no sweeper, as unset

    @field_validator("variant_quality")
    @classmethod
    def _quality(cls, value: int) -> int:
        if not 1 <= value <= 100:
            raise ValueError("must be 1 to 100")
        return value

    @model_validator(mode="after")
    def _installed(self) -> Settings:
        """Every feature asked for can run here (:func:`blobledger._base.extras.unmet`:
        the extras and programs the settings need)."""
        problems = extras.unmet(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _backends_installed(self) -> Settings:
        for line in (extras.database_problem(self.database_url),
                     extras.store_problem(self.store_url)):
            if line is not None:
                raise ValueError(line)
        return self

    @model_validator(mode="after")
    def _sweep_after_past_the_deadline(self) -> Settings:
        required = minimum_sweep_after(self.upload_deadline)
        if self.sweep_after < required:
            unit = _written_unit("sweep_after") or _written_unit("upload_deadline")
            raise ValueError(
                f"BLOBLEDGER_SWEEP_AFTER ({_shown('sweep_after', self.sweep_after)}) must "
                f"exceed BLOBLEDGER_UPLOAD_DEADLINE "
                f"({_shown('upload_deadline', self.upload_deadline)}) by a margin: at least "
                f"{format_duration(required, unit)}")
        return self

    @model_validator(mode="after")
    def _urls_within_the_grace(self) -> Settings:
        if self.read_url_expiry is not None:
            problem = url_expiry_problem(self.read_url_expiry, self.delete_grace)
            if problem is not None:
                raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _webhooks_signed(self) -> Settings:
        if self.webhook_urls and not self.webhook_secret:
            raise ValueError("BLOBLEDGER_WEBHOOK_URLS needs BLOBLEDGER_WEBHOOK_SECRET "
                             "(whsec_…): receivers verify every delivery's signature")
        if self.event_lease <= self.event_timeout:
            raise ValueError(
                f"BLOBLEDGER_EVENT_LEASE ({format_duration(self.event_lease)}) must exceed "
                f"BLOBLEDGER_EVENT_TIMEOUT ({format_duration(self.event_timeout)}): a claim "
                "must outlast one webhook call")
        return self

    @model_validator(mode="after")
    def _processors_configured(self) -> Settings:
        if "scan" in self.processors and not (self.scan_command or self.scan_url):
            raise ValueError("BLOBLEDGER_PROCESSORS names scan: set BLOBLEDGER_SCAN_COMMAND "
                             "or BLOBLEDGER_SCAN_URL")
        if self.scan_command and self.scan_url:
            raise ValueError("set BLOBLEDGER_SCAN_COMMAND or BLOBLEDGER_SCAN_URL, not both")
        if self.processing_lease <= self.scan_timeout:
            raise ValueError(
                f"BLOBLEDGER_PROCESSING_LEASE ({format_duration(self.processing_lease)}) must "
                f"exceed BLOBLEDGER_SCAN_TIMEOUT ({format_duration(self.scan_timeout)}): a "
                "scan must end before another worker may take its work over")
        return self

    def with_(self, **changes: object) -> Settings:
        """A copy with these fields changed, checked again."""
        return Settings(**{**{name: getattr(self, name) for name in Settings.model_fields},
                           **changes})

    def masked(self) -> dict[str, Any]:
        """The settings as plain data with every secret masked (for display)."""
        data = self.model_dump(mode="json")
        data["api_tokens"] = ["****:" + "+".join(sorted(scopes))
                              for scopes in self.api_tokens.values()]
        if self.token:
            data["token"] = "****"
        if self.azure.connection_string:
            data["azure"]["connection_string"] = _mask_connection_string(
                self.azure.connection_string)
        data["database_url"] = redact_url(self.database_url)
        data["webhook_urls"] = [redact_url(url) for url in self.webhook_urls]
        if self.webhook_secret:
            data["webhook_secret"] = WEBHOOK_SECRET_PREFIX + "****"
        if self.signing_key:
            data["signing_key"] = "****"
        return data


def _mask_connection_string(text: str) -> str:
    parts = []
    for item in text.split(";"):
        key, sep, _ = item.partition("=")
        secret = key.strip().lower() in ("accountkey", "sharedaccesssignature")
        parts.append(f"{key}{sep}****" if secret and sep else item)
    return ";".join(parts)


def env_name(location: tuple[int | str, ...]) -> str:
    """The environment variable of a field: ``("s3", "region")`` → BLOBLEDGER_S3_REGION."""
    return ENV_PREFIX + "_".join(str(part) for part in location).upper()


def describe_errors(exc: ValidationError, layers: Sequence[_Layer] = ()) -> list[str]:
    """One readable line per mistake, each naming where its value came from: the first of
    ``layers`` that holds it (a TOML file: the file and the key), else its variable."""
    lines = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        location = tuple(str(part) for part in error["loc"])
        if not location or message.startswith(ENV_PREFIX):
            lines.append(_named_as_given(message, layers))
            continue
        if error["type"] == "extra_forbidden":
            message = "is not a setting"
        elif error["type"] == "literal_error":
            message = "must be " + message.removeprefix("Input should be ")
        key = location[:2] if location[0] in ("azure", "s3") else location[:1]
        layer = next((layer for layer in layers if layer.holds(key)), _Layer({}))
        lines.append(layer.describe(key, message))
    return lines


_VARIABLE = re.compile(ENV_PREFIX + r"([A-Z0-9_]+)")


def _named_as_given(message: str, layers: Sequence[_Layer]) -> str:
    """A message about several settings (a model check's, naming their variables), told
    as ``file: key ...`` with the keys' names when the first setting it names came from a
    TOML file."""
    first = _VARIABLE.search(message)
    field = first.group(1).lower() if first else ""
    layer = next((layer for layer in layers if layer.holds((field,))), None)
    if layer is None or layer.file is None:
        return message
    named = _VARIABLE.sub(lambda m: m.group(1).lower() if m.group(1).lower()
                          in Settings.model_fields else m.group(0), message)
    return f"{layer.file}: {named}"


def _written_unit(field: str) -> str | None:
    """The unit the value of ``field`` being checked was written in (``90m``: ``m``)."""
    return next((unit_of(layer.values[field]) for layer in _ORIGINS.get()
                 if layer.holds((field,))), None)


def _shown(field: str, seconds: float) -> str:
    """A duration being checked, in the unit its value was written in (else a natural one)."""
    return format_duration(seconds, _written_unit(field))


def held_by_settings(settings: Settings, name: str) -> bool:
    """Whether the settings hold a creation of this name (``hold`` always, or the name under
    one of ``hold_prefixes``), whatever its writer asked."""
    return settings.hold == "always" or any(name.startswith(p) for p in settings.hold_prefixes)


def sweep_margin(upload_deadline: float) -> float:
    """The margin kept past an upload's deadline before its intent counts as dead: a
    minute, or a tenth of the deadline if that is longer. The sweeper keeps at least this
    (``sweep_after``); a retry waits this long past a dead attempt's lease."""
    return max(SWEEP_MARGIN, upload_deadline * 0.1)


def url_expiry_problem(expiry: float, delete_grace: float,
                       setting: str = "BLOBLEDGER_READ_URL_EXPIRY") -> str | None:
    """Why a signed read URL living ``expiry`` seconds could outlive its blob (None if it
    cannot): the one rule for every URL blobledger signs, the service's and Django's. A
    replaced or deleted blob stays ``delete_grace`` on the database's clock; the URL's expiry
    is read on the store's, which may run :data:`CLOCK_SKEW` behind."""
    if expiry > 0 and expiry + CLOCK_SKEW <= delete_grace:
        return None
    return (f"{setting} ({format_duration(expiry)}) must be positive and, with "
            f"{format_duration(CLOCK_SKEW)} of clock skew, within BLOBLEDGER_DELETE_GRACE "
            f"({format_duration(delete_grace)}): a signed URL must never outlive its blob")


def read_url_lifetime(settings: Settings) -> float:
    """How long a signed read URL opens its blob: ``read_url_expiry``, or else
    ``delete_grace`` less :data:`CLOCK_SKEW` (0 or less: stores hand out no signed URL)."""
    if settings.read_url_expiry is not None:
        return settings.read_url_expiry
    return settings.delete_grace - CLOCK_SKEW


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


# -- sources ------------------------------------------------------------------------------
# pydantic-settings reads the sources, in the order of ``settings_customise_sources``; what
# is kept by hand is the merge of their values (deep_update, in that order) apart from the
# validation, so that a mistake names where its value came from: the variable, or the TOML
# file and the key (validating inside BaseSettings would lose that).
class _Sources(BaseSettings):
    """Every setting as raw data (checked by :class:`Settings`, not here)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="_", env_nested_max_split=1,
        case_sensitive=False, extra="ignore", enable_decoding=False, env_ignore_empty=True)

    @classmethod
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Highest priority first: the overrides, the environment, ``.env``, the TOML file
        and botocore's own variables (``AWS_REGION``, ``AWS_PROFILE``)."""
        botocore = _Botocore(settings_cls, env_settings.env_vars
                             if isinstance(env_settings, EnvSettingsSource) else None)
        return (init_settings, env_settings, dotenv_settings, _TomlFile(settings_cls), botocore)


def _raw_field(info: FieldInfo) -> Any:
    return dict[str, Any] if info.annotation in (AzureSettings, S3Settings) else Any


#: one raw field per setting, so that the sources know the names (and the nested tables)
_RawSources = create_model(  # type: ignore[call-overload]
    "_RawSources", __base__=_Sources,
    **{name: (_raw_field(info), None) for name, info in Settings.model_fields.items()})


class _MappingEnv(EnvSettingsSource):
    """``BLOBLEDGER_*`` from a given mapping (``os.environ`` when none)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str] | None) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        if self._given is None:
            return super()._load_env_vars()
        return {key.lower(): value for key, value in self._given.items() if value != ""}


class _Botocore(PydanticBaseSettingsSource):
    """What the S3 settings take from botocore's own variables (lowest priority)."""

    def __init__(self, settings_cls: type[BaseSettings],
                 env: Mapping[str, str | None] | None) -> None:
        super().__init__(settings_cls)
        self._env = os.environ if env is None else env

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # not read field by field: see __call__

    def __call__(self) -> dict[str, Any]:
        env = {k.lower(): v for k, v in self._env.items() if v}
        s3: dict[str, Any] = {}
        if region := env.get("aws_region") or env.get("aws_default_region"):
            s3["region"] = region
        if env.get("aws_profile"):
            s3["profile"] = env["aws_profile"]
        return {"s3": s3} if s3 else {}


class _TomlFile(TomlConfigSettingsSource):
    """The ``toml_file`` of the model's config: top-level keys are the field names
    (``upload_deadline = "1h"``), tables ``[azure]`` and ``[s3]`` the backends'; an optional
    ``[blobledger]`` table is read instead of the top level when present. A file that
    cannot be read or parsed is a ConfigError (pydantic-settings skips a missing one)."""

    def _read_file(self, file_path: Path | Traversable) -> dict[str, Any]:
        try:
            with file_path.open("rb") as handle:
                data = tomllib.load(handle)
        except OSError as exc:
            raise ConfigError(f"cannot read {file_path}: {exc.strerror or exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file_path}: not valid TOML: {exc}") from None
        table = data.get("blobledger", data)
        if not isinstance(table, dict):
            raise ConfigError(f"{file_path}: [blobledger] must be a table")
        return table


def read_toml(path: Path) -> dict[str, Any]:
    """The settings of a TOML file (see :class:`_TomlFile`), unchecked."""
    return _TomlFile(_RawSources, toml_file=_existing(path))()


def _existing(path: Path) -> Path:
    if not path.is_file():
        reason = "is a directory" if path.is_dir() else "No such file or directory"
        raise ConfigError(f"cannot read {path}: {reason}")
    return path


@dataclass(frozen=True)
class _Layer:
    """What one source holds, and how a mistake in it is named."""

    values: dict[str, Any]
    file: Path | None = None  # the TOML file; None: the environment's variables

    def holds(self, location: tuple[str, ...]) -> bool:
        value: Any = self.values
        for part in location:
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        return True

    def describe(self, location: tuple[str, ...], message: str) -> str:
        if self.file is None:
            name = env_name(location)
            return f"{name} {message}" if message.startswith(("must", "is ")) \
                else f"{name}: {message}"
        key = ".".join(location)
        return f"{self.file}: {key} {message}" if message.startswith(("must", "is ")) \
            else f"{self.file}: {key}: {message}"


def _layers(env: Mapping[str, str] | None, env_file: Path | None, config_file: Path | None,
            overrides: Mapping[str, Any]) -> list[_Layer]:
    """Each source's values, highest priority first (``settings_customise_sources``)."""
    reader = _reader(env_file, config_file)
    sources = reader.settings_customise_sources(
        reader, init_settings=InitSettingsSource(reader, dict(overrides)),
        env_settings=_MappingEnv(reader, env), dotenv_settings=DotEnvSettingsSource(reader),
        file_secret_settings=SecretsSettingsSource(reader))
    return [_Layer(source(),
                   config_file if isinstance(source, TomlConfigSettingsSource) else None)
            for source in sources]


@functools.lru_cache(maxsize=16)
def _reader(env_file: Path | None, toml_file: Path | None) -> type[_Sources]:
    """The sources' settings class for these files (their paths are its config)."""
    config = SettingsConfigDict(env_file=env_file, toml_file=toml_file)
    return cast(type[_Sources], type("_Reader", (_RawSources,), {"model_config": config}))


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def load_settings(env: Mapping[str, str] | None = None, *,
                  env_file: Path | str | None = ".env",
                  config_file: Path | str | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings from, highest priority first: ``overrides``, the environment (``env``,
    else ``os.environ``), ``env_file`` (when it exists) and ``config_file`` (TOML), over the
    defaults. ConfigError, one line per mistake, when any value is wrong: a variable's names
    the variable, a TOML file's the file and the key."""
    toml = _existing(Path(config_file)) if config_file is not None else None
    dotenv = Path(env_file) if env_file is not None and Path(env_file).is_file() else None
    layers = _layers(env, dotenv, toml, overrides or {})
    values: dict[str, Any] = {}
    for layer in reversed(layers):
        values = _merge(values, layer.values)
    token = _ORIGINS.set(layers)
    try:
        return Settings(**values)
    finally:
        _ORIGINS.reset(token)


def environment_with(values: Mapping[str, str]) -> dict[str, str]:
    """The process's environment with ``values`` over it (variables set elsewhere, such as
    Django's ``BLOBLEDGER_*`` settings), for :func:`load_settings`."""
    return {**os.environ, **values}


def from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Settings from the environment alone (``os.environ`` unless given); no files read."""
    return load_settings(env, env_file=None)


def default_var_dir() -> Path:
    return Path("./var")


def table_layout(name: str) -> str:
    """The raw value of a table-layout variable (``BLOBLEDGER_TABLE_PREFIX``,
    ``BLOBLEDGER_DB_SCHEMA``), for :mod:`blobledger.models`, which reads it once at import,
    before any settings object exists: every prebuilt statement names the tables. A
    settings object then states what a ledger expects (``table_prefix``, ``db_schema``)."""
    return os.environ.get(name, "").strip()

