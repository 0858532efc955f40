"""Deprecated: moved to :mod:`blobledger.protocol.documents`."""

from typing import Any as _Any

from blobledger._deprecated import moved as _moved


def __getattr__(name: str) -> _Any:
    return _moved(__name__, name)
