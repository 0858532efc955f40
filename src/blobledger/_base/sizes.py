"""Sizes, the one parser of every size the settings and the commands read: ``1048576``,
``64MiB``, ``5GiB``, ``5GB`` (pydantic's ``ByteSize``: ``KiB``..``TiB`` binary, ``kB``..``TB``
decimal), and one shorthand of ours on top: a bare ``5G`` is binary here (5 GiB), decimal
there.

Imports nothing of blobledger's: the remote stores' settings models (which import nothing of
ours else) read their sizes with it too.
"""

from __future__ import annotations

import re

from pydantic import ByteSize, TypeAdapter, ValidationError

#: ``5G``, ``64m``: a bare binary prefix, read as ``GiB``, ``MiB`` (ByteSize: decimal)
_BINARY_SHORTHAND = re.compile(r"^\s*(\d+)\s*([kmgt])\s*$", re.IGNORECASE)
_BYTE_SIZE = TypeAdapter(ByteSize)


def size_bytes(text: str) -> int:
    """Bytes from ``1048576``, ``64MiB``, ``5GiB``, ``5G`` (binary) or ``5GB`` (decimal);
    ValueError otherwise."""
    try:
        return int(_BYTE_SIZE.validate_python(_BINARY_SHORTHAND.sub(r"\1\2iB", str(text))))
    except ValidationError:
        raise ValueError(f"{text!r} is not a size") from None
