"""C1 and C4 as one statement each, for PostgreSQL: the same guarded statements as
:mod:`blobledger.protocol.transitions` (built from them, so the guards are the same objects),
joined by data-modifying CTEs, and run in autocommit (:meth:`blobledger.db.Database.fetch_one`):
one round trip per step instead of BEGIN, two to four statements and COMMIT.

Only the common steps take this form: an unkeyed creation's C1 (its document and blob rows),
and its C4 under the deferred retag when no processor is configured (the blob row committed
with its retag owed, the document ready, ``document.ready`` written). A keyed creation, an
upload's completion, a held creation and the inline retag's C4 (whose fallback onto a
sweeper's claim is a second compare-and-set decided by the first) keep their transactions.

Why one statement is the same step: PostgreSQL runs the sub-statements of one statement in
one transaction on one snapshot, and commits them together or not at all, so the step is as
atomic as the transaction it replaces. Within it, each later sub-statement is conditioned on
the earlier one's ``RETURNING`` (``EXISTS``): C4's document moves only if its blob row's
compare-and-set won, and its event is written only from the document row that moved. A
concurrent compare-and-set on the blob row (a sweeper's claim) is decided by the row lock as
before: the loser's ``UPDATE`` waits, re-reads the row's newest version, no longer matches,
and everything conditioned on it does nothing. SQLite (in this process, no round trips)
keeps the transactions: it has no data-modifying CTEs, and its ``BEGIN IMMEDIATE`` is what
queues its writers.

A lost connection under one of these (the statement may or may not have committed): C4 is a
compare-and-set, run once more as a transaction's would be
(:func:`blobledger.db.once_more_if_lost`); C1 is an insert, run once more only because its
own unique keys make the two runs exclusive (``Ledger.inserted``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Insert, Select, Update, bindparam, exists, literal, select
from sqlalchemy.sql.dml import ReturningUpdate

from blobledger.protocol import events
from blobledger.protocol.models import DocumentStatus, EventType

#: C1's parameters that name the document's and the blob's columns apart (both tables have a
#: ``name`` and a ``content_type``)
_C1_DOCUMENT = dict(id="d_id", bucket="d_bucket", name="d_name", blob_name="b_name",
                    content_type="b_type", hold="d_hold", owner="d_owner")
_C1_BLOB = dict(name="b_name", document_id="d_id", kind="b_kind", content_type="b_type",
                attempt="b_attempt")


def c1(insert_document: Insert, insert_blob: Insert) -> Insert:
    """C1 in one statement: the pending document (a CTE) and its pending, leased blob row.
    Parameters: :func:`c1_params`, and the clock's (``now_s``, ``lease_s``)."""
    document = insert_document.values(
        **{column: bindparam(param) for column, param in _C1_DOCUMENT.items()})
    return insert_blob.values(
        **{column: bindparam(param) for column, param in _C1_BLOB.items()},
    ).add_cte(document.cte("c1_document"))


def c1_params(document: dict[str, Any], blob: dict[str, Any]) -> dict[str, Any]:
    """:func:`c1`'s parameters from the two inserts' own (keyed by column name)."""
    return {**{p: document[c] for c, p in _C1_DOCUMENT.items()},
            **{p: blob[c] for c, p in _C1_BLOB.items()}}


def c4_deferred(commit_blob_owed: Update, ready_document: ReturningUpdate[Any]) -> Select[Any]:
    """C4 under the deferred retag, in one statement: the blob row's compare-and-set
    (committed, its retag owed), the document ready only if that won, and ``document.ready``
    from the document row that moved (the caller's parameters give the event's id and
    payload: :func:`c4_event_params`). Returns the document's row, or none if lost."""
    blob = commit_blob_owed.returning(commit_blob_owed.table.c.name).cte("c4_blob")
    document = ready_document.where(exists(select(blob.c.name))).cte("c4_document")
    d = document.c
    values: dict[str, Any] = dict(
        state=literal(events.PENDING), attempts=literal(0), created_at=events.NOW,
        next_attempt_at=events.NOW, lease_until=events.NOW,
        event_id=bindparam("e_event_id"), type=literal(EventType.READY.value),
        subject=d.id, document_id=d.id, blob_name=d.blob_name, version=d.version, name=d.name,
        size=d.size, sha256=d.sha256, md5=d.md5, content_type=d.content_type,
        payload=bindparam("e_payload"))
    event = events.events.insert().from_select(
        list(values), select(*list(values.values())).where(
            d.status == DocumentStatus.READY.value))
    return select(document).add_cte(event.cte("c4_event"))


def c4_event_params(row: dict[str, Any]) -> dict[str, Any]:
    """The event's own parameters, from :func:`blobledger.protocol.events.document_row`."""
    return {"e_event_id": row["event_id"], "e_payload": row["payload"]}

