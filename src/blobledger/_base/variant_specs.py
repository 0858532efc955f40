"""What ``BLOBLEDGER_VARIANTS`` names: each derived image by name, with its bounding box.

``thumb=256x256,medium=1024x1024``: a variant named ``thumb`` fits inside 256 by 256 pixels
(the aspect ratio kept, never enlarged). Names are 1 to 32 characters of ``a-z0-9_-``
starting with a letter or a digit; each side is 1 to 8192 pixels. Pure parsing: the
rendering is :mod:`blobledger.variants.images`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from blobledger.errors import ConfigError

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_BOX = re.compile(r"^([0-9]{1,5})x([0-9]{1,5})$")
MAX_SIDE = 8192
#: the output formats a variant may be written in, and their media types
FORMATS = {"webp": "image/webp", "jpeg": "image/jpeg", "png": "image/png"}


@dataclass(frozen=True)
class VariantSpec:
    """One configured variant: its name and the box it fits in."""

    name: str
    width: int
    height: int

    def __str__(self) -> str:
        return f"{self.name}={self.width}x{self.height}"


def check_variant_name(name: str) -> str:
    """The name, or ConfigError naming what a variant's name may hold."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{name!r} is not a variant name (1-32 of a-z, 0-9, _ and -, "
                          "starting with a letter or a digit)"[:200])
    return name


def parse_variants(text: str) -> dict[str, VariantSpec]:
    """``name=WxH`` items separated by commas (spaces allowed around them); '' gives none.
    ConfigError for a malformed item, a repeated name or a side out of 1..8192."""
    specs: dict[str, VariantSpec] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, box = (part.strip() for part in item.partition("="))
        match = _BOX.match(box.lower())
        if not sep or match is None:
            raise ConfigError(f"{item!r} is not name=WIDTHxHEIGHT (e.g. thumb=256x256)")
        check_variant_name(name)
        width, height = int(match[1]), int(match[2])
        if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
            raise ConfigError(f"{item!r}: each side must be 1 to {MAX_SIDE} pixels")
        if name in specs:
            raise ConfigError(f"variant {name!r} is named twice")
        specs[name] = VariantSpec(name, width, height)
    return specs
