"""Parsing of durations (``90``, ``90s``, ``15m``, ``2h``, ``1d``) and sizes (``5GiB``).

Sizes are :mod:`blobledger._base.sizes`'s, given the settings' error here.
Durations stay hand-written: pydantic's ``timedelta`` reads ISO 8601 (``PT30M``) and
numbers, not the ``30m`` / ``1h`` / ``2d`` forms the settings are documented with.
"""

from __future__ import annotations

import re

from blobledger._base.sizes import size_bytes
from blobledger.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``2h`` or ``1d``; ConfigError otherwise."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a duration (use e.g. 90, 90s, 15m, 2h)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes from ``1048576``, ``64MiB``, ``5GiB``, ``5G`` (binary) or ``5GB`` (decimal)."""
    try:
        return size_bytes(text)
    except ValueError:
        raise ConfigError(f"{what}: {text!r} is not a size (use e.g. 1048576, 64MiB, 5GiB)") \
            from None


def format_duration(seconds: float, unit: str | None = None) -> str:
    """A short human form: ``90s``, ``15m``, ``2h``, ``26.4h`` (not ``1584m``: a whole
    number of a unit under 1000 of it, else hours or minutes with one decimal); in ``unit``
    (``s``, ``m``, ``h``, ``d``: the one a user wrote a value in) when given."""
    if unit in _DURATION_UNITS and unit not in (None, "ms"):
        return f"{round(seconds / _DURATION_UNITS[unit], 2):g}{unit}"
    whole = next((f"{int(seconds // factor)}{name}" for name, factor in _NATURAL
                  if seconds >= factor and seconds % factor == 0), None)
    if whole is None or seconds // _DURATION_UNITS[whole[-1]] < 1000:
        return whole or f"{seconds:g}s"
    for name, factor in _NATURAL[1:]:
        if seconds >= factor and (seconds * 10) % factor == 0:
            return f"{seconds / factor:g}{name}"
    return whole


def unit_of(text: object) -> str | None:
    """The unit a duration was written in (``"90m"``: ``m``); None for a bare number."""
    match = _DURATION.match(str(text)) if isinstance(text, str) else None
    return match.group(2) if match else None


_NATURAL = (("d", 86400), ("h", 3600), ("m", 60))
