"""On SQLite, the grace of a file a save or delete detached counts from the commit.

A detach stamps ``deleting`` with its statement's clock. On PostgreSQL a deferred trigger
moves the stamp to the commit (the ledger's migration 0011). SQLite has none, so here the
names a transaction detaches are noted on Django's connection (:func:`note_detached`, from
the ``post_save`` and ``post_delete`` receivers), and the connection's commit stamps them
again as the transaction's last statement before ``COMMIT``
(:func:`blobledger.protocol.grace.restamp_deleting`). The re-stamp is inside the
transaction, which holds SQLite's one write lock from its first write: nobody sees the
``deleting`` row before the commit, and the detach and its re-stamp commit together or not
at all (no window for a crash between a commit and a hook). A rollback, or the connection's
close, forgets the names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from blobledger.django.sql import DjangoConnection
from blobledger.protocol.grace import restamp_deleting

#: the connection's attribute: the names its transaction detached, each with its clock
#: offset (read at the commit)
DETACHED = "_blobledger_detached"
_WRAPPED = "_blobledger_restamps"


def note_detached(alias: str, names: Iterable[str], offset: Callable[[], float]) -> None:
    """``names`` were moved to ``deleting`` in the transaction of Django's connection
    ``alias`` (SQLite only: PostgreSQL's trigger does this); ``offset`` gives the ledger's
    clock offset at the commit."""
    connection = connections[alias]
    found = list(names)
    if connection.vendor != "sqlite" or not found:
        return
    _wrap(connection)
    pending: dict[str, Callable[[], float]] = connection.__dict__.setdefault(DETACHED, {})
    for name in found:
        pending[name] = offset


def _wrap(connection: BaseDatabaseWrapper) -> None:
    """The connection's commit re-stamps first; its rollback or close forgets (once per
    wrapper)."""
    if connection.__dict__.get(_WRAPPED):
        return
    wrapper: Any = connection  # the private commit and rollback are not in the stubs
    commit, rollback, close = wrapper._commit, wrapper._rollback, wrapper._close

    def _commit() -> Any:
        restamp(connection)
        return commit()

    def _rollback() -> Any:
        connection.__dict__.pop(DETACHED, None)
        return rollback()

    def _close() -> Any:
        connection.__dict__.pop(DETACHED, None)
        return close()

    wrapper._commit, wrapper._rollback, wrapper._close = _commit, _rollback, _close
    connection.__dict__[_WRAPPED] = True


def restamp(connection: BaseDatabaseWrapper) -> None:
    """Before ``COMMIT``: the noted names stamped ``deleting`` with the clock now."""
    pending: dict[str, Callable[[], float]] | None = connection.__dict__.pop(DETACHED, None)
    if not pending:
        return
    by_offset: dict[float, list[str]] = {}
    for name, offset in pending.items():
        by_offset.setdefault(offset(), []).append(name)
    conn = DjangoConnection(connection.alias)
    for offset_s, names in by_offset.items():
        restamp_deleting(conn, names, offset_s)
