"""Timeouts, retries and the circuit breaker of a remote store: the settings both remote
backends share (``[azure]`` and ``[s3]`` of a TOML file, ``BLOBLEDGER_AZURE_*`` and
``BLOBLEDGER_S3_*``, e.g. ``BLOBLEDGER_AZURE_CONNECT_TIMEOUT=1.5``). Times are seconds.

=================  =======  ================================================================
setting            default  meaning
=================  =======  ================================================================
connect_timeout    3        seconds opening a connection to the store may take
read_timeout       30       seconds the store may leave an answer silent
retries            2        retries of one operation after a failed attempt (0: none)
probe_timeout      2        seconds ``/readyz`` and the commands' start-up check wait
breaker_failures   3        operations in a row without an answer that open the breaker
                            (0: no breaker)
breaker_cooldown   5        seconds an open breaker fails fast before operations probe again
=================  =======  ================================================================

A plain pydantic model, importing nothing of blobledger's (as the backends' settings):
the breaker itself is :mod:`blobledger.stores.resilience`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StoreLimits(BaseModel):
    """Timeouts, retries and the circuit breaker of a remote store (see the module)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_timeout: float = Field(default=3.0, gt=0)
    read_timeout: float = Field(default=30.0, gt=0)
    retries: int = Field(default=2, ge=0)
    probe_timeout: float = Field(default=2.0, gt=0)
    breaker_failures: int = Field(default=3, ge=0)
    breaker_cooldown: float = Field(default=5.0, gt=0)
