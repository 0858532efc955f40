"""A field's staging inside Django's transaction, on SQLite.

SQLite has one writer. Once Django's transaction has written, the ledger's own connection
cannot commit A1 until that transaction ends; once it has only read, the ledger's commit
would make the transaction's own later write fail (``database is locked``). The admin's
change view reads the row inside its ``atomic()`` before it saves, so there the ordinary
staging (A1 and the confirm committed on the ledger's connection) cannot work. So on SQLite,
inside a transaction, a field's save stages **on Django's connection**:

1. A1 (the ``pending`` attachment row, this attempt's) in a savepoint of Django's
   transaction: the connection now holds SQLite's write lock until the transaction ends;
2. A2, the create-only upload tagged ``pending``; the confirm (digests) on Django's
   connection; a failure here rolls the savepoint back, then deletes this attempt's own blob
   conditioned on ``pending`` (its row is gone for good: names are never reused);
3. A4 in ``post_save``, as on any database (:mod:`blobledger.django.signals`);
4. **after the commit** (after the failpoint ``django.after_commit``), A3: the blob retagged
   ``committed``, conditioned on ``pending`` (:func:`tag_after_commit`).

The row is never seen by another connection before the commit, and at the commit it is
``attached`` (or ``pending``, if the field was saved without its row: the sweeper's as
usual). So what a failure leaves:

- rolled back, or the process dies before the commit: no row; a blob tagged ``pending`` under
  a name nothing will ever refer to. ``reconcile --fix`` deletes it (an orphan tagged
  ``pending``, conditioned on that tag, re-read under SQLite's write lock so a transaction
  still holding its row finishes first), and the lifecycle rule is the fallback;
- the process dies after the commit, before A3: an attached row whose blob is tagged
  ``pending``; ``reconcile --fix`` retags it ``committed`` (the commit decided it: tags only
  go forward);
- paused anywhere before the commit: the transaction holds the write lock, so the sweeper
  and the reconciler's deletes wait for it (they cannot see its row, nor remove its blob).

A3 waits for the commit because a blob tagged ``committed`` under a row that rolled back
would be an orphan nothing may delete: ``committed`` is what keeps a blob from every
cleanup.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import IO, Any

from django.db import NotSupportedError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from blobledger.blocking import BlockingLedger
from blobledger.django.conf import failpoint
from blobledger.django.sql import DjangoConnection
from blobledger.errors import IntentLost
from blobledger.protocol.attachments import StagedBlob
from blobledger.protocol.models import PENDING_TAG
from blobledger.protocol.transitions.attachments import begin_stage_in, confirm_staged_in
from blobledger.protocol.transitions.records import Intent

log = logging.getLogger("blobledger.django")

#: Django's SQLite wait for the write lock when ``OPTIONS`` sets no ``timeout`` (the ledger's
#: own connections wait as long: :mod:`blobledger.db`)
BUSY_TIMEOUT_MS = 30_000


def begin_immediate(sender: Any, connection: BaseDatabaseWrapper, **_: Any) -> None:
    """``connection_created``: a SQLite connection whose ``OPTIONS`` choose no
    ``transaction_mode`` begins its transactions ``IMMEDIATE``, and one that sets no
    ``timeout`` waits :data:`BUSY_TIMEOUT_MS` for the write lock.

    A field's save stages on Django's connection inside the transaction (A1 is a write). In
    a deferred transaction that has already read (the admin's change view reads the row
    first), that write must upgrade a read snapshot: SQLite (WAL) answers ``database is
    locked`` at once when another writer holds the lock or committed since the read, and
    the busy timeout does not apply; nothing can retry it inside the transaction. Begun
    ``IMMEDIATE``, the transaction takes the write lock before its first read, waiting its
    turn under the busy timeout, so concurrent saves queue instead of failing. The
    protocol's steps are unchanged: the lock is only taken earlier, so a process that dies
    or pauses inside the transaction leaves what it left before (docs/django.md)."""
    if connection.vendor != "sqlite":
        return
    options = connection.settings_dict.get("OPTIONS") or {}
    if options.get("transaction_mode") is None:
        connection.transaction_mode = "IMMEDIATE"  # type: ignore[attr-defined]
    if "timeout" not in options:
        with connection.cursor() as cursor:
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def in_transaction(alias: str) -> bool:
    """Whether a field's save on ``alias`` stages on Django's connection (SQLite, inside a
    transaction: every model save, since ``save_base`` runs in ``atomic()``)."""
    connection = connections[alias]
    return connection.vendor == "sqlite" and connection.in_atomic_block


def refuse_in_transaction(alias: str, what: str) -> None:
    """A write that commits on the ledger's own connection (a document's save, replace or
    delete) is refused with :class:`~django.db.NotSupportedError` and the advice inside
    Django's SQLite transaction on ``alias``, before anything is written: begun
    ``IMMEDIATE`` (:func:`begin_immediate`) that transaction holds SQLite's one write lock,
    so the ledger's commit would wait for it until the busy timeout; begun deferred, it
    would make the transaction's own later write fail."""
    connection = connections[alias]
    if connection.vendor == "sqlite" and connection.in_atomic_block:
        raise NotSupportedError(_refusal(alias, what))


def _refusal(alias: str, what: str) -> str:
    return (f"{what} inside transaction.atomic() on the SQLite database {alias!r}: a "
            "standalone file (a document) commits on the ledger's own connection, and this "
            "transaction holds SQLite's one write lock until it ends. Do it after the "
            "commit (transaction.on_commit(lambda: ...)) or outside atomic(); a model's "
            "FileField saves inside the transaction")


def stage_in_transaction(ledger: BlockingLedger, alias: str, data: IO[bytes], *,
                         content_type: str | None, filename: str | None,
                         folder: str | None) -> StagedBlob:
    """A1, A2 and the confirm inside Django's transaction on ``alias``; A3 after its commit
    (see the module's docstring)."""
    inner = ledger.ledger

    async def new_intent() -> tuple[Intent, str | None]:
        return inner.staging_intent(content_type, filename, folder)

    intent, filename = ledger.run(new_intent())
    times = inner.transitions.times(lease=inner.settings.upload_deadline)
    conn = DjangoConnection(alias)
    try:
        with transaction.atomic(using=alias):  # a savepoint: a failure leaves no row
            begin_stage_in(conn, intent, filename, times)  # A1
            failpoint("stage.after_insert")
            digests = ledger.run(inner.upload(intent, data))  # A2
            failpoint("stage.after_upload")
            if not confirm_staged_in(conn, intent, digests, times):
                raise IntentLost("the staged row is not this attempt's")  # cannot happen
            failpoint("stage.after_confirm")
    except BaseException:
        with contextlib.suppress(Exception):  # else an orphan for reconcile --fix
            ledger.run(inner.store.delete(intent.blob_name, if_tags=PENDING_TAG))
        raise
    return StagedInTransaction(
        name=intent.blob_name, size=digests.size, sha256=digests.sha256, md5=digests.md5,
        content_type=intent.content_type, filename=filename, attempt=intent.attempt,
        intent=intent, ledger=ledger)


@dataclass(frozen=True)
class StagedInTransaction(StagedBlob):
    """A blob staged inside Django's transaction: still tagged ``pending``; its row's
    commit is followed by :func:`tag_after_commit`."""

    intent: Intent | None = field(default=None, repr=False, compare=False)
    ledger: BlockingLedger | None = field(default=None, repr=False, compare=False)


def tag_after_commit(staged: StagedBlob) -> None:
    """A3, once the row that attached ``staged`` committed (nothing for a blob staged the
    ordinary way, tagged already). A failure is logged, not raised: the save succeeded, and
    ``reconcile --fix`` retags an attached row's pending blob."""
    if not isinstance(staged, StagedInTransaction) or staged.ledger is None \
            or staged.intent is None:
        return
    try:
        staged.ledger.run(staged.ledger.ledger.tag_committed(staged.intent))
    except Exception:
        log.warning("A3 after the commit failed for %s: reconcile --fix retags it",
                    staged.name, exc_info=True)
        return
    failpoint("stage.after_tag")
