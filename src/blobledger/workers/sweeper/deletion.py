"""The sweeper's deletion path: rows ``deleting`` past the grace, claimed; each blob no
document or owner points at is retagged ``deleting`` conditioned on ``committed``, deleted
conditioned on ``deleting`` (a batch), and its row removed. And the late delete after a
stale intent's rows went (a paused writer's blob, conditioned on ``pending``)."""

from __future__ import annotations

from collections.abc import Sequence

from blobledger import failpoints
from blobledger.errors import BlobLedgerError, BlobNotFound, ConditionNotMet, StoreUnavailable
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import COMMITTED_TAG as COMMITTED
from blobledger.protocol.models import DELETING_TAG as DELETING
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import STATE_TAG, BlobState
from blobledger.workers.sweeper.batches import CONCURRENCY, SweepReport, _Claim, _gather, log


class DeletionPath:
    """The deletion path's steps, on the sweeper's ledger."""

    ledger: Ledger

    async def _delete_late(self, names: Sequence[str], report: SweepReport) -> None:
        """Delete once more, conditioned on ``pending``, the blobs of rows just removed: a
        writer paused inside its upload may have created the blob after this sweeper's
        delete, and found the row still there when its confirm lost (so it left the blob to
        this sweeper). A writer that finds the row gone deletes its own blob, so one of the
        two always sees the other. Names are never reused; best effort (what a failure
        leaves, ``reconcile --fix`` removes)."""
        if not names:
            return
        await failpoints.hit("sweep.after_remove")
        for outcome in await self.ledger.store.delete_many([(n, PENDING) for n in names]):
            if outcome.deleted:
                report.late += 1
                log.info("sweep: deleted %s, uploaded by a paused writer after its intent "
                         "was swept", outcome.name)
            elif outcome.error is not None and not isinstance(outcome.error, ConditionNotMet):
                report.errors += 1
                log.warning("sweep: delete of %s failed: %s", outcome.name, outcome.error)

    # -- the deletion path ----------------------------------------------------------------
    async def _delete_batch(self, claim: _Claim, report: SweepReport) -> None:
        await failpoints.hit("deletion.after_claim")
        pointed = await self.ledger.transitions.pointed_at(claim.names)
        for name in sorted(pointed):
            report.refused += 1
            log.error("deletion guard: a document or an owner still points at %s; not deleted",
                      name)
        candidates = [name for name in claim.names if name not in pointed]
        steps = await _gather(CONCURRENCY, [self._tag_deleting(name) for name in candidates])
        absent = [n for n, step in zip(candidates, steps, strict=True) if step == "absent"]
        # An abandoned intent's blob may still be tagged pending: its row left ``pending``
        # for ``deleting`` by compare-and-set, so no writer can commit it any more.
        items = [(n, DELETING if step == "tagged" else PENDING)
                 for n, step in zip(candidates, steps, strict=True)
                 if step in ("tagged", "pending")]
        for name, step in zip(candidates, steps, strict=True):
            if step == "refused":
                report.refused += 1
                log.error("deletion guard: %s is not tagged committed or deleting; not deleted",
                          name)
            elif step == "error":
                report.errors += 1
        report.absent += len(absent)
        await failpoints.hit("deletion.after_tag")
        done = list(absent)
        if items:
            outcomes = await self.ledger.store.delete_many(items)
            for outcome in outcomes:
                if outcome.error is None:
                    done.append(outcome.name)
                    report.absent += not outcome.deleted
                elif isinstance(outcome.error, ConditionNotMet):
                    report.refused += 1
                    log.error("deletion guard: storage refused to delete %s", outcome.name)
                else:
                    report.errors += 1
                    log.warning("deletion: delete of %s failed: %s", outcome.name,
                                outcome.error)
        await failpoints.hit("deletion.after_delete")
        if done:
            removed = await self.ledger.transitions.remove_deleted(claim.token, done)
            report.deleted += len(removed)
            await self._delete_late(removed, report)

    async def _tag_deleting(self, name: str) -> str:
        """Tag ``deleting`` conditioned on ``committed``: tagged, absent, pending (an
        abandoned upload's blob, deleted conditioned on that tag), refused or error."""
        store = self.ledger.store
        try:
            await store.set_tags(name, DELETING, if_tags=COMMITTED)
            return "tagged"
        except BlobNotFound:
            return "absent"
        except ConditionNotMet:
            try:
                tags = await store.get_tags(name)
                state = tags.get(STATE_TAG)
            except BlobNotFound:
                return "absent"
            if state == BlobState.PENDING:
                return "pending"
            if not tags:  # an Azure direct upload's, created untagged; its row is deleting
                await store.set_tags(name, DELETING)  # for good, so nothing can commit it
                return "tagged"
            return "tagged" if state == BlobState.DELETING else "refused"
        except StoreUnavailable:
            raise
        except BlobLedgerError as exc:
            log.warning("deletion: tagging %s failed: %s", name, exc)
            return "error"
