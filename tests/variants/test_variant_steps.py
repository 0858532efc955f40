"""The variant steps' terms on a real database: V1 takes over a lapsed claim (fencing it)
past the claims it fenced before, and refuses to when the lapsed maker extended its lease
meanwhile (PostgreSQL: the fence waits for that maker's confirm, then finds its lease
running), so one variant never has two makers; and the invariants check reports an
attached variant whose document version is gone."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text, update

from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobKind, BlobRow
from blobledger.protocol.owners import VARIANT_COLUMN, Owner
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import new_token
from blobledger.protocol.variant_owner import DOCUMENTS, version_key
from blobledger.protocol.variant_steps import VariantSteps, _confirm
from blobledger.variants import make_variant
from blobledger.workers.invariants import check
from tests.support.holds import Holds
from tests.variants.images import png

LEASE = 30.0


def intent(n: int) -> Intent:
    return Intent(blob_name=f"variants/v{n}-{new_token()}.webp", document_id="",
                  kind=BlobKind.ATTACHMENT, attempt=new_token(), content_type="image/webp")


async def states(ledger: Ledger) -> dict[str, str]:
    async with ledger.db.session(readonly=True) as session:
        found = (await session.execute(select(BlobRow.name, BlobRow.state).where(
            BlobRow.owner_column.startswith(VARIANT_COLUMN)))).all()
    return {name: state for name, state in found}


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"])
async def test_lapsed_claims_are_fenced_and_taken_over_in_turn(ledger: Ledger) -> None:
    """Each claim whose lease lapsed is fenced by the next maker, which claims afresh; the
    claims fenced earlier (``deleting``) do not stand in the way of the next takeover."""
    doc = await ledger.create("a.png", png(), content_type="image/png")
    steps = VariantSteps(ledger.transitions, LEASE)
    owner = Owner(DOCUMENTS, version_key(doc.id, doc.version), f"{VARIANT_COLUMN}thumb:x")
    first, second, third = intent(1), intent(2), intent(3)
    assert (await steps.claim(owner, doc.id, doc.version, first)).outcome == "claimed"
    assert (await steps.claim(owner, doc.id, doc.version, second)).outcome == "busy"
    ledger.clock_offset = LEASE + 1
    took = await steps.claim(owner, doc.id, doc.version, second)
    assert (took.outcome, took.fenced) == ("claimed", first.blob_name)
    ledger.clock_offset = 2 * (LEASE + 1)
    took = await steps.claim(owner, doc.id, doc.version, third)
    assert (took.outcome, took.fenced) == ("claimed", second.blob_name)
    assert await states(ledger) == {first.blob_name: "deleting",
                                    second.blob_name: "deleting", third.blob_name: "pending"}


async def _waiting_on_a_lock(ledger: Ledger) -> None:
    """Until another connection of this database waits on a lock."""
    query = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                 "AND datname = current_database()")
    async with asyncio.timeout(10):
        while True:
            async with ledger.db.transaction(readonly=True) as conn:
                if (await conn.execute(query)).scalar_one() > 0:
                    return
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("backend", ["postgresql-local"])
async def test_a_takeover_loses_to_the_lapsed_makers_confirm(ledger: Ledger) -> None:
    """A maker woken past its lease confirms (its lease extended) while another maker's V1,
    which read the claim lapsed, is fencing it: the fence waits for the confirm's row lock,
    then finds the lease running, and V1 answers busy: one maker holds the variant.
    (SQLite takes the write lock at V1's first statement: the confirm cannot come between.)"""
    doc = await ledger.create("a.png", png(), content_type="image/png")
    steps = VariantSteps(ledger.transitions, LEASE)
    owner = Owner(DOCUMENTS, version_key(doc.id, doc.version), f"{VARIANT_COLUMN}thumb:x")
    first, second = intent(1), intent(2)
    assert (await steps.claim(owner, doc.id, doc.version, first)).outcome == "claimed"
    ledger.clock_offset = LEASE + 1  # the first maker wakes past its lease
    async with ledger.db.transaction() as conn:  # its confirm, not yet committed
        confirmed = await conn.execute(_confirm, dict(
            b_name=first.blob_name, b_attempt=first.attempt, b_size=1, b_sha256="0" * 64,
            b_md5="0" * 32, **ledger.transitions.times(lease=LEASE)))
        assert confirmed.rowcount == 1
        taking = asyncio.create_task(steps.claim(owner, doc.id, doc.version, second))
        await _waiting_on_a_lock(ledger)
    assert (await taking).outcome == "busy"
    assert await states(ledger) == {first.blob_name: "pending"}


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"])
async def test_the_check_reports_a_variant_of_a_version_gone(ledger: Ledger,
                                                             holds: Holds) -> None:
    """An attached variant whose owner names a document that is not there, a version the
    document is not at, or a document still pending is reported as leaked (each made by
    moving a real variant's owner key; another document lives at version 1)."""
    doc = await ledger.create("a.png", png(), content_type="image/png")
    made = await make_variant(ledger, doc.id, "thumb")
    assert (await check(ledger)).ok
    holds.at("create.after_insert")
    pending = asyncio.create_task(ledger.create("b.png", png(), content_type="image/png"))
    await holds.wait("create.after_insert")
    async with ledger.db.session(readonly=True) as session:
        (pending_id,) = (await session.execute(select(BlobRow.document_id).where(
            BlobRow.state == "pending", BlobRow.kind == BlobKind.CREATE.value))).one()
    assert pending_id is not None
    try:
        for key in (version_key("0" * 32, doc.version), version_key(doc.id, doc.version + 1),
                    version_key(pending_id, 1)):
            async with ledger.db.transaction() as conn:
                await conn.execute(update(BlobRow).where(BlobRow.name == made.blob).values(
                    owner_key=key))
            report = await check(ledger)
            found = [v.detail for v in report.violations
                     if v.subject == f"attachment {made.blob}"]
            assert found == [f"its document version {key} is gone (a leaked variant)"], found
    finally:
        holds.go("create.after_insert")
        await pending
