"""The kinds of value the settings hold, read from text: durations (``90``, ``90s``, ``15m``,
``2h``, ``1d``), sizes (``1048576``, ``64MiB``, ``5GiB``), whole numbers and seconds; and
:func:`setting`, a field with what the docs' table says of it (``blobledger config
--table``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic.config import JsonDict

from blobledger._base.durations import parse_duration, parse_size
from blobledger.errors import ConfigError


def setting(default: Any, meaning: str, shown: str | None = None) -> Any:
    """A field of the settings: its default, its ``meaning`` in the docs' table (markdown)
    and, when its value alone would not say it, how its default is ``shown`` there."""
    extra: JsonDict | None = {"shown": shown} if shown is not None else None
    return Field(default, description=meaning, json_schema_extra=extra)


def _duration(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ConfigError:
            raise ValueError(f"{value!r} is not a duration (use e.g. 90, 90s, 15m, 2h)") \
                from None
    return value


def _size(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ConfigError:
            raise ValueError(f"{value!r} is not a size (use e.g. 1048576, 64MiB, 5GiB)") \
                from None
    return value


def _whole(value: object) -> object:
    if isinstance(value, str):
        if not (value.strip().isascii() and value.strip().isdigit()):
            raise ValueError(f"{value!r} is not a whole number")
        return int(value.strip())
    return value


def _seconds(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value.strip() or "0")
        except ValueError:
            raise ValueError(f"must be a number of seconds, not {value!r}") from None
    return value


def positive(value: float) -> float:
    """A field check: durations, sizes and counts that must be more than nothing."""
    if value <= 0:
        raise ValueError("must be positive")
    return value


def not_negative(value: float) -> float:
    if value < 0:
        raise ValueError("must not be negative")
    return value


Duration = Annotated[float, BeforeValidator(_duration)]
Size = Annotated[int, BeforeValidator(_size)]
Count = Annotated[int, BeforeValidator(_whole)]
Seconds = Annotated[float, BeforeValidator(_seconds)]
