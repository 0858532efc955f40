"""The Azure backend's settings: ``settings.azure`` of :class:`blobledger.config.Settings`.

==================================  ===============================================
variable                            meaning
==================================  ===============================================
BLOBLEDGER_AZURE_CONNECTION_STRING  connection string (a secret: masked when shown)
BLOBLEDGER_AZURE_ACCOUNT_URL        account URL, signed in with DefaultAzureCredential
==================================  ===============================================

Timeouts, retries and the circuit breaker (``BLOBLEDGER_AZURE_CONNECT_TIMEOUT``,
``_READ_TIMEOUT``, ``_RETRIES``, ``_PROBE_TIMEOUT``, ``_BREAKER_FAILURES``,
``_BREAKER_COOLDOWN``) are :class:`blobledger.stores.limits.StoreLimits`.
"""

from __future__ import annotations

from pydantic import ConfigDict

from blobledger.stores.limits import StoreLimits


class AzureSettings(StoreLimits):
    """How to reach the storage account of an ``azure://container`` store, and how long
    it may take (:class:`~blobledger.stores.limits.StoreLimits`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connection_string: str | None = None
    account_url: str | None = None
