"""The compare-and-set steps of making a variant (:mod:`blobledger.variants`), beside
:mod:`blobledger.protocol.transitions`, whose conventions they keep.

V1 :meth:`VariantSteps.claim`: in one transaction, under the document row's lock (``FOR
UPDATE`` on PostgreSQL, the write lock on SQLite), the version must still be the document's;
then the variant's live row decides: ``attached`` (made already), ``pending`` under a lease
that runs (another maker holds it: wait), ``pending`` past its lease (its maker died or
stalled: the row is fenced ``pending -> deleting`` by compare-and-set on the token seen, and
a new claim is made), none (a new claim). A claim is a ``pending`` attachment row with a
fresh blob name, this maker's token and a lease of ``BLOBLEDGER_VARIANT_LEASE``, whose owner
fields already name the version and the variant (so the claim is found by them).

:meth:`VariantSteps.confirm` (before the retag): still this maker's, the lease extended,
the digests recorded. V4 :meth:`VariantSteps.attach`: under the document row's lock, the
version still the document's, then ``pending -> attached`` by compare-and-set on the name
and the maker's token. A maker paused past its lease loses here (its row was fenced by the
maker that took over, or by the sweeper); a maker whose version was replaced or deleted
meanwhile loses too, so no variant is ever attached to a version that has ended (R4 and the
delete take the same lock, then detach that version's variants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, bindparam, insert, select, update

from blobledger.errors import Digests
from blobledger.protocol.models import BlobKind, BlobState, DocumentStatus
from blobledger.protocol.owners import Owner
from blobledger.protocol.transitions import Transitions
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import LEASE, NOW
from blobledger.protocol.variant_owner import blobs, documents

PENDING, ATTACHED, DELETING = (BlobState.PENDING.value, BlobState.ATTACHED.value,
                               BlobState.DELETING.value)

_lock_version = select(documents.c.id).where(
    documents.c.id == bindparam("d_id"), documents.c.version == bindparam("d_version"),
    documents.c.status != DocumentStatus.PENDING.value).with_for_update()
_live = select(blobs.c.name, blobs.c.state, blobs.c.attempt, blobs.c.size, blobs.c.sha256,
               blobs.c.md5, blobs.c.content_type, (blobs.c.lease_until < NOW).label("lapsed"),
               ).where(
    blobs.c.owner_table == bindparam("o_table"), blobs.c.owner_key == bindparam("o_key"),
    blobs.c.owner_column == bindparam("o_column"), blobs.c.state.in_([PENDING, ATTACHED]),
).order_by(blobs.c.state)  # attached before pending
_fence_lapsed = update(blobs).where(
    blobs.c.name == bindparam("b_name"), blobs.c.state == PENDING,
    blobs.c.attempt.is_not_distinct_from(bindparam("b_seen")), blobs.c.lease_until < NOW,
).values(state=DELETING, attempt=None, changed_at=NOW, lease_until=NOW)
_insert_claim = insert(blobs).values(
    document_id=None, kind=BlobKind.ATTACHMENT.value, state=PENDING, lease_until=LEASE,
    created_at=NOW, changed_at=NOW)
_mine = (blobs.c.name == bindparam("b_name"), blobs.c.state == PENDING,
         blobs.c.attempt == bindparam("b_attempt"))
_confirm = update(blobs).where(*_mine).values(
    lease_until=LEASE, size=bindparam("b_size"), sha256=bindparam("b_sha256"),
    md5=bindparam("b_md5"))
_attach = update(blobs).where(*_mine, blobs.c.kind == BlobKind.ATTACHMENT.value).values(
    state=ATTACHED, attempt=None, changed_at=NOW, lease_until=NOW)
_attached = select(blobs).where(
    blobs.c.owner_table == bindparam("o_table"), blobs.c.owner_key == bindparam("o_key"),
    blobs.c.owner_column == bindparam("o_column"), blobs.c.state == ATTACHED)


@dataclass(frozen=True)
class Claim:
    """What V1 found: ``claimed`` (this maker's now), ``attached`` (``row`` is the made
    variant), ``busy`` (another maker's lease runs) or ``gone`` (the version ended)."""

    outcome: str
    row: Row[Any] | None = None
    fenced: str | None = None  # a lapsed maker's blob this claim sent to the deletion path


class VariantSteps:
    """V1, confirm and V4 on the ledger's database, with the ledger's clock."""

    def __init__(self, transitions: Transitions, lease: float) -> None:
        self.transitions = transitions
        self.lease = lease

    async def claim(self, owner: Owner, doc_id: str, version: int, intent: Intent) -> Claim:
        """V1 (see the module's text)."""
        times = self.transitions.times(lease=self.lease)
        params = dict(d_id=doc_id, d_version=version, o_table=owner.table, o_key=owner.key,
                      o_column=owner.column, **times)
        async with self.transitions.db.transaction() as conn:
            if (await conn.execute(_lock_version, params)).first() is None:
                return Claim("gone")
            live = (await conn.execute(_live, params)).first()
            fenced = None
            if live is not None and live.state == ATTACHED:
                return Claim("attached", live)
            if live is not None:
                if not live.lapsed:
                    return Claim("busy")
                moved = await conn.execute(_fence_lapsed, dict(
                    params, b_name=live.name, b_seen=live.attempt))
                if int(getattr(moved, "rowcount", 0)) != 1:
                    return Claim("busy")
                fenced = live.name
            await conn.execute(_insert_claim, dict(
                params, name=intent.blob_name, content_type=intent.content_type,
                attempt=intent.attempt, owner_table=owner.table, owner_key=owner.key,
                owner_column=owner.column, filename=None))
        return Claim("claimed", fenced=fenced)

    async def confirm(self, intent: Intent, digests: Digests) -> bool:
        """Before the retag: still this maker's (its lease extended, digests recorded)."""
        async with self.transitions.db.transaction() as conn:
            result = await conn.execute(_confirm, dict(
                b_name=intent.blob_name, b_attempt=intent.attempt, b_size=digests.size,
                b_sha256=digests.sha256, b_md5=digests.md5,
                **self.transitions.times(lease=self.lease)))
            return int(getattr(result, "rowcount", 0)) == 1

    async def attach(self, intent: Intent, doc_id: str, version: int) -> bool:
        """V4 (see the module's text): False if the version ended or the claim was lost."""
        params = dict(d_id=doc_id, d_version=version, b_name=intent.blob_name,
                      b_attempt=intent.attempt, **self.transitions.times())
        async with self.transitions.db.transaction() as conn:
            if (await conn.execute(_lock_version, params)).first() is None:
                return False
            result = await conn.execute(_attach, params)
            return int(getattr(result, "rowcount", 0)) == 1

    async def attached(self, owner: Owner) -> Row[Any] | None:
        """The variant's attached row, if it has been made (a read, no lock)."""
        async with self.transitions.db.transaction(readonly=True) as conn:
            return (await conn.execute(_attached, dict(
                o_table=owner.table, o_key=owner.key, o_column=owner.column))).first()
