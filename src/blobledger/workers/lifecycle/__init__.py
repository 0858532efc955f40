"""What every backend's lifecycle policy shares: the states a fallback rule expires, and its
whole-days argument. The policies themselves live beside their backends
(``stores/azure/lifecycle.py``, ``stores/s3/lifecycle.py``)."""

from __future__ import annotations

import re

from blobledger.errors import ConfigError

#: the states whose blobs a fallback rule may delete (never ``committed``)
STATES = ("pending", "deleting")


def parse_days(text: object) -> int:
    """Whole days, at least 1; ConfigError otherwise."""
    value = str(text).strip()
    if not re.fullmatch(r"\d+", value) or int(value) < 1:
        raise ConfigError(f"--days {value!r}: the lifecycle policy takes whole days, at least 1")
    return int(value)


#: the lifecycle rule's age must be at least this many times the retag lag that is warned
#: about (``BLOBLEDGER_RETAG_WARN_AFTER``): the rule deletes blobs tagged ``pending``, and a
#: ready document's blob is still tagged so until its deferred retag (docs/protocol.md)
RETAG_FACTOR = 100


def check_days(days: int, *, sweep_after: float | None = None,
               retag_warn_after: float | None = None) -> None:
    """ConfigError unless N days exceed ``sweep_after`` (the rule must never race an upload
    the sweeper itself would still leave alone) and are at least :data:`RETAG_FACTOR` times
    ``retag_warn_after`` (far beyond any retag lag the service allows)."""
    if sweep_after is not None and days * 86400 <= sweep_after:
        raise ConfigError(f"--days {days} does not exceed BLOBLEDGER_SWEEP_AFTER "
                          f"({sweep_after:g}s)")
    if retag_warn_after is not None and days * 86400 < RETAG_FACTOR * retag_warn_after:
        raise ConfigError(f"--days {days} is not far beyond BLOBLEDGER_RETAG_WARN_AFTER "
                          f"({retag_warn_after:g}s): the rule's age must be at least "
                          f"{RETAG_FACTOR} times it")
