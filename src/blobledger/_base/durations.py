"""Parsing of durations (``90``, ``90s``, ``15m``, ``2h``, ``1d``) and sizes (``5GiB``).

Sizes are pydantic's ``ByteSize`` (``KiB``..``TiB`` binary, ``kB``..``TB`` decimal), with
one shorthand of ours kept on top: a bare ``5G`` is binary here (5 GiB), decimal there.
Durations stay hand-written: pydantic's ``timedelta`` reads ISO 8601 (``PT30M``) and
numbers, not the ``30m`` / ``1h`` / ``2d`` forms the settings are documented with.
"""

from __future__ import annotations

import re

from pydantic import ByteSize, TypeAdapter, ValidationError

from blobledger.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
#: ``5G``, ``64m``: a bare binary prefix, read as ``GiB``, ``MiB`` (ByteSize: decimal)
_BINARY_SHORTHAND = re.compile(r"^\s*(\d+)\s*([kmgt])\s*$", re.IGNORECASE)
_BYTE_SIZE = TypeAdapter(ByteSize)


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds from ``90``, ``90s``, ``15m``, ``2h`` or ``1d``; ConfigError otherwise."""
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"{what}: {text!r} is not a duration (use e.g. 90, 90s, 15m, 2h)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def parse_size(text: str, *, what: str = "size") -> int:
    """Bytes from ``1048576``, ``64MiB``, ``5GiB``, ``5G`` (binary) or ``5GB`` (decimal)."""
    value = _BINARY_SHORTHAND.sub(r"\1\2iB", str(text))
    try:
        return int(_BYTE_SIZE.validate_python(value))
    except ValidationError:
        raise ConfigError(f"{what}: {text!r} is not a size (use e.g. 1048576, 64MiB, 5GiB)") \
            from None


def format_duration(seconds: float) -> str:
    """A short human form: ``90s``, ``15m``, ``2h``."""
    for unit, factor in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= factor and seconds % factor == 0:
            return f"{int(seconds // factor)}{unit}"
    return f"{seconds:g}s"
