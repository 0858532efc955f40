"""The deletion grace from the commit, on SQLite: the detach's ``deleting`` stamp moved to
the last statement before ``COMMIT``.

A detach (:func:`~blobledger.protocol.transitions.detach_replaced`,
:func:`~blobledger.protocol.transitions.detach_owner`) stamps ``deleting`` with the
statement's clock. On PostgreSQL a deferred trigger moves that stamp to the commit
(migration 0011). SQLite has no deferred trigger, so the integrations do it themselves: they
note the names a transaction detaches (:func:`attached_names`, read before the detach) and,
as the transaction's last statement before its ``COMMIT``, stamp them again
(:func:`restamp_deleting`): Django through the connection's commit
(:mod:`blobledger.django.staging`), SQLAlchemy in ``before_commit``
(:mod:`blobledger.sqlalchemy`).

Why that is the commit's time, and what a failure leaves: SQLite has one writer. From its
first write (the detach, or the owner row's write before it) until its ``COMMIT`` the
transaction holds the write lock, so no other connection sees the ``deleting`` row, nor
changes it, before the commit, and the re-stamp is in the same transaction as the detach:
both commit, or neither. There is no window between a commit and a hook for a crash to hit.
The stamp is then earlier than the commit by the ``COMMIT`` statement alone (the journal's
write and sync), the same margin a one-statement transaction has. A transaction that
rolls back leaves no ``deleting`` row to re-stamp (the ``state`` condition skips any name a
savepoint's rollback returned to ``attached``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import bindparam, select, update

from blobledger.protocol.transitions import ATTACHED, DELETING, NOW, blobs


def attached_names(conn: Any, table: str, key: str, column: str | None = None) -> set[str]:
    """The blobs attached to an owner row (one column's, or all its columns'), on the
    application's connection: what a detach about to run will move to ``deleting``."""
    query = select(blobs.c.name).where(
        blobs.c.state == ATTACHED, blobs.c.owner_table == table, blobs.c.owner_key == key)
    if column is not None:
        query = query.where(blobs.c.owner_column == column)
    return {str(name) for name in conn.execute(query).scalars()}


_restamp = (update(blobs)
            .where(blobs.c.name.in_(bindparam("names", expanding=True)),
                   blobs.c.state == DELETING)
            .values(changed_at=NOW, lease_until=NOW))


def restamp_deleting(conn: Any, names: Iterable[str], offset: float = 0.0) -> int:
    """Stamp the ``deleting`` rows of ``names`` with the clock now (plus ``offset``), on the
    application's connection, as its transaction's last statement before ``COMMIT``. The
    number re-stamped."""
    found = sorted(set(names))
    if not found:
        return 0
    result = conn.execute(_restamp, {"names": found, "now_s": offset})
    return int(result.rowcount)
