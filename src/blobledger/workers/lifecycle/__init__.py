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
