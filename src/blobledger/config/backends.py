"""The remote stores' settings: ``settings.azure`` and ``settings.s3`` (``[azure]`` and
``[s3]`` of a TOML file, ``BLOBLEDGER_AZURE_*`` and ``BLOBLEDGER_S3_*``), each a backend's
address and its :class:`StoreLimits` (timeouts, retries, the circuit breaker; seconds).

Plain pydantic models importing nothing of blobledger's but its one size parser
(:mod:`blobledger._base.sizes`), the lowest room of the settings: the stores
(:mod:`blobledger.stores`) read them, the settings compose them, and importing them imports
no SDK. The S3 credentials themselves (``AWS_ACCESS_KEY_ID``, …, the shared
files, instance roles) are botocore's business: it reads them through its own chain, and
blobledger never sees them. The breaker itself is :mod:`blobledger.stores.resilience`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from blobledger._base.sizes import size_bytes

MIB = 1024 * 1024
#: S3's largest PutObject
LARGEST_PUT = 5 * 1024 * MIB


class StoreLimits(BaseModel):
    """Timeouts, retries and the circuit breaker of a remote store (see the module)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_timeout: float = Field(
        default=3.0, gt=0, description="seconds opening a connection to the store may take")
    read_timeout: float = Field(
        default=30.0, gt=0, description="seconds the store may leave an answer silent")
    retries: int = Field(
        default=2, ge=0, description="retries of one store operation (about 0.5 s apart on "
        "Azure, botocore's backoff on S3)")
    probe_timeout: float = Field(
        default=2.0, gt=0, description="seconds `/readyz` and the commands' start-up check "
        "wait for the store")
    breaker_failures: int = Field(
        default=3, ge=0, description="store operations in a row without any answer after "
        "which the store is not asked (each request then fails at once with 503 and "
        "`Retry-After`); `0`: never")
    breaker_cooldown: float = Field(
        default=5.0, gt=0, description="seconds the store is not asked; then the next "
        "operations probe it, and one answer of any kind closes the breaker")


class AzureSettings(StoreLimits):
    """How to reach the storage account of an ``azure://container`` store, and how long
    it may take (:class:`StoreLimits`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connection_string: str | None = Field(
        default=None, description="for `azure://` (`settings.azure.connection_string`; a "
        "secret, masked when shown)")
    account_url: str | None = Field(
        default=None, description="for `azure://` with `DefaultAzureCredential` "
        "(`settings.azure.account_url`)")


class S3Settings(StoreLimits):
    """How to reach the bucket of an ``s3://bucket`` store, and how long it may take
    (:class:`StoreLimits`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_url: str | None = Field(
        default=None, description="for `s3://` on an S3-compatible service (moto, MinIO; "
        "`settings.s3.endpoint_url`)", json_schema_extra={"shown": "AWS"})
    addressing: Literal["path", "virtual", "auto"] = Field(
        default="auto", description="`path`, `virtual` or `auto`")
    region: str | None = Field(
        default=None, description="for `s3://` (else `AWS_REGION` / `AWS_DEFAULT_REGION`)",
        json_schema_extra={"shown": "`us-east-1`"})
    profile: str | None = Field(
        default=None, description="the shared-credentials profile (else `AWS_PROFILE`); the "
        "credentials themselves (`AWS_ACCESS_KEY_ID`, …, files, roles) are read by "
        "botocore's own chain")
    single_put_limit: int = Field(
        default=8 * MIB, description="largest upload sent as one create-only PutObject, read "
        "whole into memory first (`64MiB`, bytes; at most `5GiB`); a larger one streams as a "
        "multipart upload of 8 MiB parts, four at once",
        json_schema_extra={"shown": "`8MiB`"})

    @field_validator("single_put_limit", mode="before")
    @classmethod
    def _size(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = size_bytes(value)
            except ValueError:
                raise ValueError(f"{value!r} is not a size (use e.g. 8388608, 64MiB)") \
                    from None
        if isinstance(value, int) and not 0 < value <= LARGEST_PUT:
            raise ValueError("must be more than 0 and at most 5GiB (S3's largest PutObject)")
        return value

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
