"""The one :class:`Settings`: every area's settings composed, and the checks across them.

Each area (:mod:`.storage`, :mod:`.embedded`, :mod:`.protocol`, :mod:`.service`,
:mod:`.workers`, :mod:`.pipeline`, :mod:`.variants`, :mod:`.client`) checks its own fields;
what holds between fields, often of two areas (the sweep past the upload deadline, a signed
URL within the deletion grace, a claim outlasting the work it covers, what the settings ask
for being installed), is checked here and only here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, ValidationError, model_validator

from blobledger._base import extras
from blobledger._base.durations import format_duration
from blobledger._base.redact import redact_url
from blobledger._base.scopes import scope_text
from blobledger.config.client import ClientSettings, DiagnosticSettings
from blobledger.config.embedded import EmbeddedSettings
from blobledger.config.naming import ORIGINS, describe_errors, shown, written_unit
from blobledger.config.pipeline import PipelineSettings
from blobledger.config.protocol import ProtocolSettings, minimum_sweep_after, url_expiry_problem
from blobledger.config.s3api import S3ApiSettings
from blobledger.config.service import ServiceSettings
from blobledger.config.storage import StorageSettings
from blobledger.config.variants import VariantSettings
from blobledger.config.workers import WEBHOOK_SECRET_PREFIX, WorkerSettings
from blobledger.errors import ConfigError

#: fields whose values are secrets: shown masked by ``blobledger config``
SECRET_FIELDS = frozenset({"api_tokens", "token", "azure.connection_string",
                           "webhook_secret", "signing_key", "s3api_keys"})


# pydantic orders the fields from the last base to the first: the areas are listed bottom up,
# so that the settings (``blobledger config``, the docs' table) read storage first
class Settings(DiagnosticSettings, ClientSettings, VariantSettings, PipelineSettings,
               WorkerSettings, S3ApiSettings, ServiceSettings, ProtocolSettings, EmbeddedSettings,
               StorageSettings):
    """Every setting, typed and checked; frozen (derive a changed copy with :meth:`with_`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError("\n".join(
                describe_errors(exc, ORIGINS.get(), Settings.model_fields))) from None

    # -- the checks across fields --------------------------------------------------------
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
            unit = written_unit("sweep_after") or written_unit("upload_deadline")
            raise ValueError(
                f"BLOBLEDGER_SWEEP_AFTER ({shown('sweep_after', self.sweep_after)}) must "
                f"exceed BLOBLEDGER_UPLOAD_DEADLINE "
                f"({shown('upload_deadline', self.upload_deadline)}) by a margin: at least "
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

    # -- copies and display ----------------------------------------------------------------
    def with_(self, **changes: object) -> Settings:
        """A copy with these fields changed, checked again."""
        return Settings(**{**{name: getattr(self, name) for name in Settings.model_fields},
                           **changes})

    def masked(self) -> dict[str, Any]:
        """The settings as plain data with every secret masked (for display)."""
        data = self.model_dump(mode="json")
        data["api_tokens"] = ["****:" + scope_text(scopes)
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
        data["s3api_keys"] = [f"{key_id}:****:" + scope_text(scopes)
                              for key_id, (_, scopes) in self.s3api_keys.items()]
        return data


def _mask_connection_string(text: str) -> str:
    parts = []
    for item in text.split(";"):
        key, sep, _ = item.partition("=")
        secret = key.strip().lower() in ("accountkey", "sharedaccesssignature")
        parts.append(f"{key}{sep}****" if secret and sep else item)
    return ";".join(parts)
