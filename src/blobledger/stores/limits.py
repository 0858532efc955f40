"""Timeouts, retries and the circuit breaker of a remote store (``[azure]`` and ``[s3]`` of
a TOML file, ``BLOBLEDGER_AZURE_*`` and ``BLOBLEDGER_S3_*``, e.g.
``BLOBLEDGER_AZURE_CONNECT_TIMEOUT=1.5``): :class:`StoreLimits`, defined with the backends'
settings in :mod:`blobledger.config.backends`, below the stores (the settings compose it);
the breaker itself is :mod:`blobledger.stores.resilience`."""

from __future__ import annotations

from blobledger.config.backends import StoreLimits

__all__ = ["StoreLimits"]
