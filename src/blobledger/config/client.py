"""The command line's client commands (``put``, ``get``, ``ls``, ``rm``): the service they
call and their bearer token; and the diagnostics: telemetry and the test hooks."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from blobledger.config.fields import Seconds, setting

DEFAULT_URL = "http://127.0.0.1:8000"


class ClientSettings(BaseModel):
    """The service a client command calls, and how it is allowed in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = setting(DEFAULT_URL, "the service of `put`, `get`, `ls`, `rm`")
    token: str | None = setting(None, "the bearer token of `put`, `get`, `ls`, `rm`")


class DiagnosticSettings(BaseModel):
    """Telemetry, and the hooks the crash tests and soaks use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    otel: bool = setting(False, "OpenTelemetry spans (see Telemetry)")
    clock_offset: Seconds = setting(
        0.0, "seconds added to the clock (for crash tests and soaks only)")
    failpoints: str = setting("", "armed failpoints (`blobledger.failpoints`; tests only)",
                              "unset")
