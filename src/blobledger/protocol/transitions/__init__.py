"""Every change to ``documents``, ``blobs`` and ``idempotency_keys``: named, guarded steps.

Each transition is a compare-and-set on what its actor last saw: a blob row's state and
owner token (``attempt``: an upload attempt's, or a sweeper's claim), a document's status,
blob and version. Each says whether it won; an actor that lost does nothing further. Nothing
else in blobledger writes these tables. Times are the database's (:mod:`blobledger.protocol.clock`).
C4 (and the roll-forward), R4, delete, A4 and the detach steps write their event
(:mod:`blobledger.protocol.events`) in their own transaction; no other step writes one.

Writers (``Ledger``): C1 :meth:`begin_create`, :meth:`take_over` (a retry resumes a dead
attempt's intent), :meth:`confirm` (before C3/R3: the intent is still this attempt's, its
lease extended; a placeholder name is replaced here), C4 :meth:`commit_create`, R1
:meth:`begin_replace`, R4 :meth:`commit_replace`, :meth:`delete_document` (both also detach
the ended version's variants, :func:`~blobledger.protocol.variant_owner.detach_variants`), and
:meth:`abandon` (a live writer's failure path: its intent to the deletion path).

Attachments (``Ledger.stage`` and :mod:`blobledger.sqlalchemy`): A1 :meth:`begin_stage`,
:meth:`confirm_staged` (before A3, recording the digests); A4 :func:`attach` and the detach
steps :func:`detach_replaced` and :func:`detach_owner` (with :func:`sync_owner_column`, what
an integration calls for one owner column) are plain functions on the
*application's* connection, so that they commit or roll back with the application's own
write (they never open a transaction of their own).

Resumable uploads (``Resumable``): :meth:`begin_upload` (C1 with the upload's row, the
intent leased until the upload expires), :meth:`record_parts` (the durable offset, advanced
by compare-and-set on the offset seen and the owner token), :meth:`confirm_received`
(``serve`` stored a direct upload's bytes). They go through ``confirm``, ``commit_create``
(which also closes the upload, in C4's transaction) and ``abandon`` like any creation;
:meth:`close_settled_upload` closes an upload an older release left open beside its ready
document. An upload that stages an attachment starts with :meth:`begin_staged_upload` (A1
with the upload's row) and ends with ``confirm_staged`` and :meth:`finish_upload` (after A3).

Workers (``Sweeper``): :meth:`claim`, :meth:`remove_swept`, :meth:`roll_forward`,
:meth:`hand_to_deletion` (also the fence of a stale staged attachment), :meth:`pointed_at`,
:meth:`remove_deleted`, :meth:`purge_keys`; an upload's row goes with its intent's
(``staged_handles`` names the parts to drop first).

Held documents (``protocol/held.py``): C4 and the roll-forward make a held creation ``held``
and insert its work rows; the moves out of ``held`` (ready, or rejected to the deletion
path) are :class:`blobledger.protocol.held.Held`'s, built on these statements.

The rooms: :mod:`~blobledger.protocol.transitions.statements` (the tables, the bound times,
every statement, built once: building one per call cost more CPU than the round trip),
:mod:`~blobledger.protocol.transitions.records` (intents, keys, uploads),
:mod:`~blobledger.protocol.transitions.documents`,
:mod:`~blobledger.protocol.transitions.uploads`,
:mod:`~blobledger.protocol.transitions.attachments` and
:mod:`~blobledger.protocol.transitions.workers` (the steps of each writer), on
:mod:`~blobledger.protocol.transitions.base`; :class:`Transitions` is all of them. On
PostgreSQL an unkeyed creation's C1, and its C4 under the deferred retag with nothing to
hold, are those same statements joined into one each and run in autocommit
(:mod:`blobledger.protocol.single`: one round trip per step).
"""

from __future__ import annotations

from blobledger.protocol.transitions.attachments import (
    AttachmentSteps,
    attach,
    attached_to,
    begin_stage_in,
    column_blobs,
    confirm_staged_in,
    detach_owner,
    detach_replaced,
    sync_owner_column,
)
from blobledger.protocol.transitions.documents import DocumentSteps
from blobledger.protocol.transitions.records import (
    Intent,
    KeyRecord,
    ReplaceOutcome,
    UploadOwner,
    UploadRecord,
)
from blobledger.protocol.transitions.statements import (
    ATTACHED,
    ATTACHMENT_KEY,
    CLAIM_PREFIX,
    COMMITTED,
    CUTOFF,
    DELETING,
    EXPIRES,
    HOLD_KEY,
    LEASE,
    NOW,
    PENDING,
    PLACEHOLDER,
    blobs,
    claim_token,
    claimed,
    documents,
    keys,
    new_token,
    processing,
    readable,
    uploads,
)
from blobledger.protocol.transitions.uploads import UploadSteps
from blobledger.protocol.transitions.workers import WorkerSteps


class Transitions(DocumentSteps, UploadSteps, AttachmentSteps, WorkerSteps):
    """The named compare-and-set steps, on one database, for one ledger's settings."""


__all__ = [
    "ATTACHED", "ATTACHMENT_KEY", "CLAIM_PREFIX", "COMMITTED", "CUTOFF", "DELETING", "EXPIRES",
    "HOLD_KEY", "LEASE", "NOW", "PENDING", "PLACEHOLDER", "AttachmentSteps", "DocumentSteps",
    "Intent", "KeyRecord", "ReplaceOutcome", "Transitions", "UploadOwner", "UploadRecord",
    "UploadSteps", "WorkerSteps", "attach", "attached_to", "begin_stage_in", "blobs",
    "claim_token", "claimed", "column_blobs", "confirm_staged_in", "detach_owner",
    "detach_replaced", "documents", "keys", "new_token", "processing", "readable",
    "sync_owner_column", "uploads"]
