"""The ``Range`` header (RFC 9110 section 14.2), read alike by the service and the Django
view: one satisfiable byte range, or the whole representation, or 416.

The grammar is werkzeug's (``werkzeug.http.parse_range_header``); what stays here is where
its semantics are not ours: it gives up on positions of more than 4300 digits (Python's
``int`` limit) where a range past the end must be a 416, and returns ``bytes=-0`` as
malformed where it is unsatisfiable. Positions are ASCII digits only (werkzeug's own check).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from werkzeug.http import parse_range_header

#: more digits than any byte position can have: such a number is treated as "very large"
MAX_DIGITS = 18
_LONG_POSITION = re.compile(f"[0-9]{{{MAX_DIGITS + 1},}}", re.ASCII)
_ZERO_SUFFIX = re.compile(r"[ \t]*bytes[ \t]*=[ \t]*-[ \t]*0+[ \t]*", re.ASCII | re.IGNORECASE)


@dataclass(frozen=True)
class ByteRange:
    start: int
    length: int

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.start + self.length - 1}/{size}"


class Unsatisfiable(Exception):
    """The Range names no byte of the representation (416)."""


def _clamp_position(match: re.Match[str]) -> str:
    """A position of more than MAX_DIGITS digits, as one larger than any size: werkzeug
    ``int()``s positions, and Python refuses to past 4300 digits (the range would then be
    ignored, where the documented answer to a start past the end is a 416)."""
    digits = match.group().lstrip("0") or "0"
    return digits if len(digits) <= MAX_DIGITS else str(10**MAX_DIGITS)


def parse_range(value: str | None, size: int) -> ByteRange | None:
    """The single byte range asked for, or None to send the whole representation.

    Invalid syntax, other units and multiple ranges are ignored (RFC 9110 allows a server
    to ignore Range); a syntactically valid range past the end raises Unsatisfiable, and so
    does a zero suffix (``bytes=-0``, which werkzeug returns as malformed). Positions are
    ASCII digits of any length (a huge one is simply past the end).
    """
    if value is None:
        return None
    if _LONG_POSITION.search(value):
        value = _LONG_POSITION.sub(_clamp_position, value)
    parsed = parse_range_header(value)
    if parsed is None:
        if _ZERO_SUFFIX.fullmatch(value):
            raise Unsatisfiable
        return None
    if parsed.units != "bytes" or len(parsed.ranges) != 1:
        return None
    start, stop = parsed.ranges[0]
    if start < 0:  # a suffix: the last -start bytes
        if size == 0:
            raise Unsatisfiable
        length = min(-start, size)
        return ByteRange(size - length, length)
    if start >= size:
        raise Unsatisfiable
    end = size if stop is None else min(stop, size)
    return ByteRange(start, end - start)
