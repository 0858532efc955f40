"""Parsing of durations (``90``, ``90s``, ``15m``, ``2h``, ``1d``) and sizes (``5GiB``)."""

from __future__ import annotations

import re

from blobledger.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1, "b": 1,
    "k": 1024, "kib": 1024, "kb": 1000,
    "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3,
    "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
}


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``2h`` or ``1d``; ConfigError otherwise."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a duration (use e.g. 90, 90s, 15m, 2h)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes from ``1048576``, ``64MiB``, ``5GiB``, ``5G`` (binary) or ``5GB`` (decimal)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a size (use e.g. 1048576, 64MiB, 5GiB)")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _SIZE_UNITS[unit]


def format_duration(seconds: float) -> str:
    """A short human form: ``90s``, ``15m``, ``2h``."""
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= factor and seconds % factor == 0:
            return f"{int(seconds // factor)}{unit}"
    return f"{seconds:g}s"
