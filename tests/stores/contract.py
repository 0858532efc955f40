"""The conformance suite ships in the package (:mod:`blobledger.testing`); the helpers the
backends' own tests share are re-exported here."""

from blobledger.testing.conformance import (
    COMMITTED,
    PENDING,
    StoreContract,
    new_name,
    put,
    read_all,
    stream,
)

__all__ = ["COMMITTED", "PENDING", "StoreContract", "new_name", "put", "read_all", "stream"]
