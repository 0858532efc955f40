"""The S3 backend (``s3://bucket[/prefix]``): the store (:mod:`.store`, its reads in
:mod:`.reads`), its error mapping (:mod:`.errors`), its doctor
(:mod:`.doctor`), its lifecycle configuration (:mod:`.lifecycle`) and its settings
(:mod:`.settings`). The store and aiobotocore load on first use: importing the settings
alone does not import botocore."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blobledger.stores.s3.errors import map_errors, translate
    from blobledger.stores.s3.store import S3Store

__all__ = ["S3Store", "map_errors", "translate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        home = "store" if name == "S3Store" else "errors"
        return getattr(importlib.import_module(f"blobledger.stores.s3.{home}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
