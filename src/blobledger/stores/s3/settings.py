"""The S3 backend's settings: ``settings.s3`` of :class:`blobledger.config.Settings`.

===========================  ============================================================
variable                     meaning
===========================  ============================================================
BLOBLEDGER_S3_ENDPOINT_URL   an S3-compatible endpoint (moto, MinIO); unset: AWS
BLOBLEDGER_S3_ADDRESSING     ``path``, ``virtual`` or ``auto`` (the default)
BLOBLEDGER_S3_REGION         the region; else ``AWS_REGION``, else ``AWS_DEFAULT_REGION``
AWS_PROFILE                  the shared-credentials profile (``s3.profile``)
===========================  ============================================================

The credentials themselves (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, the shared files, instance roles) are botocore's business: it reads
them itself, through its own credential chain, and blobledger never sees them.

Timeouts, retries and the circuit breaker (``BLOBLEDGER_S3_CONNECT_TIMEOUT``,
``_READ_TIMEOUT``, ``_RETRIES``, ``_PROBE_TIMEOUT``, ``_BREAKER_FAILURES``,
``_BREAKER_COOLDOWN``) are :class:`blobledger.stores.limits.StoreLimits`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, field_validator

from blobledger.stores.limits import StoreLimits


class S3Settings(StoreLimits):
    """How to reach the bucket of an ``s3://bucket`` store, and how long it may take
    (:class:`~blobledger.stores.limits.StoreLimits`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str | None = None
    addressing: Literal["path", "virtual", "auto"] = "auto"
    region: str | None = None
    profile: str | None = None

    @field_validator("addressing", mode="before")
    @classmethod
    def _addressing(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() not in ("path", "virtual", "auto"):
            raise ValueError("must be path, virtual or auto")
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def path_style(self) -> bool:
        """Path-style addressing (``endpoint/bucket/key``) was asked for."""
        return self.addressing == "path"
