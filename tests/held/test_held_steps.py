"""The processing steps' terms, each on a real database (SQLite and PostgreSQL): a claim
takes only the pending work of the processors the worker runs, whose lease has expired; a
verdict, a release and a drop change the claimed row of that document and processor only,
while it is still the claim's; a document read for a run is a held one; an acceptance or a
rejection answers the retries of its own creation's idempotency key only; the purge removes
rejected rows only."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.errors import IdempotencyConflict
from blobledger.protocol.models import ProcessingRow
from tests.held.conftest import PNG, LedgerFactory

LEASE_PAST = 700.0  # past the default processing lease (600 s)
BOTH = {"processors": ("content-type", "scan"), "scan_command": "true"}


async def work_states(ledger: Ledger) -> dict[tuple[str, str], str]:
    async with ledger.db.session() as session:
        rows = (await session.execute(select(ProcessingRow))).scalars()
        return {(r.document_id, r.processor): r.state for r in rows}


async def test_a_claim_takes_only_the_processors_the_worker_runs(
        open_ledger: LedgerFactory) -> None:
    """A worker that runs one processor never claims another's work (it would give the
    verdict of a processor it does not run)."""
    async with open_ledger(**BOTH) as ledger:
        doc = await ledger.create("a.txt", b"text", content_type="text/plain", hold=True)
        _, claimed = await ledger.held.claim(("content-type",), 10, 600)
        assert [(w.document_id, w.processor) for w in claimed] == [(doc.id, "content-type")]
        _, claimed = await ledger.held.claim(("scan",), 10, 600)
        assert [(w.document_id, w.processor) for w in claimed] == [(doc.id, "scan")]


async def test_a_claim_skips_leased_work_for_work_it_can_take(
        open_ledger: LedgerFactory) -> None:
    """The oldest work, claimed and leased, does not use up a claim's limit: the claim takes
    the next work whose lease has expired."""
    async with open_ledger() as ledger:
        await ledger.create("first.png", PNG, content_type="image/png", hold=True)
        second = await ledger.create("second.png", PNG, content_type="image/png", hold=True)
        _, [first_work] = await ledger.held.claim(("content-type",), 1, 600)
        assert first_work.document_id != second.id
        _, claimed = await ledger.held.claim(("content-type",), 1, 600)
        assert [w.document_id for w in claimed] == [second.id]


async def test_a_settled_document_is_not_read_as_held(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger:
        await ledger.create("a.png", PNG, content_type="image/png", hold=True)
        token, [work] = await ledger.held.claim(("content-type",), 1, 600)
        assert await ledger.held.document(work) is not None
        assert await ledger.held.accept(token, work) == "ready"
        assert await ledger.held.document(work) is None


async def test_a_late_verdict_finds_its_document_gone_beside_other_held_ones(
        open_ledger: LedgerFactory) -> None:
    """The verdict's first step locks its own document: another document held at the same
    version does not make a settled one look held."""
    async with open_ledger() as first, open_ledger(clock_offset=LEASE_PAST) as later:
        doc = await first.create("a.png", PNG, content_type="image/png", hold=True)
        token, [work] = await first.held.claim(("content-type",), 1, 600)
        other = await first.create("b.png", PNG, content_type="image/png", hold=True)
        token2, claimed = await later.held.claim(("content-type",), 1, 600)
        assert [w.document_id for w in claimed] == [doc.id]
        assert await later.held.accept(token2, claimed[0]) == "ready"
        assert await first.held.accept(token, work) == "gone"
        assert await first.held.reject(token, work, "late") == "gone"
        assert (await first.get(doc.id)).status == "ready"
        state = await first.hold_state(other.id)
        assert state is not None and state.status == "held"


async def test_a_drop_removes_this_claims_row_once(open_ledger: LedgerFactory) -> None:
    """A drop answers True for the claim's own row (removed), False once it is gone and for
    another token; it removes no other row claimed with the same token."""
    async with open_ledger(**BOTH) as ledger:
        one = await ledger.create("one.txt", b"one", content_type="text/plain", hold=True)
        two = await ledger.create("two.txt", b"two", content_type="text/plain", hold=True)
        token, claimed = await ledger.held.claim(("content-type", "scan"), 10, 600)
        assert len(claimed) == 4
        mine = next(w for w in claimed if (w.document_id, w.processor) == (one.id, "scan"))
        assert not await ledger.held.drop("another token", mine)
        assert await ledger.held.drop(token, mine)
        assert not await ledger.held.drop(token, mine)
        assert set(await work_states(ledger)) == {
            (one.id, "content-type"), (two.id, "content-type"), (two.id, "scan")}


async def test_a_verdict_and_a_release_change_their_own_row_only(
        open_ledger: LedgerFactory) -> None:
    """One token claimed both processors of two documents: an acceptance records that
    processor's verdict on that document alone, a failed run releases that row alone."""
    async with open_ledger(**BOTH) as ledger:
        one = await ledger.create("one.txt", b"one", content_type="text/plain", hold=True)
        two = await ledger.create("two.txt", b"two", content_type="text/plain", hold=True)
        token, claimed = await ledger.held.claim(("content-type", "scan"), 10, 600)
        work = {(w.document_id, w.processor): w for w in claimed}
        assert await ledger.held.failed(token, work[two.id, "scan"], "boom", 1)
        assert await ledger.held.accept(token, work[one.id, "scan"]) == "accepted"
        assert await work_states(ledger) == {
            (one.id, "content-type"): "pending", (one.id, "scan"): "accepted",
            (two.id, "content-type"): "pending", (two.id, "scan"): "pending"}
        # the rows the release did not touch are still this claim's
        assert await ledger.held.accept(token, work[two.id, "content-type"]) == "accepted"
        assert await ledger.held.accept(token, work[one.id, "content-type"]) == "ready"


async def test_a_verdict_answers_its_own_creations_key_only(
        open_ledger: LedgerFactory) -> None:
    """The acceptance writes the ready document into its creation's key, the rejection
    clears it: another creation's key keeps answering with its own document."""
    async with open_ledger() as ledger:
        ready = await ledger.create("ready.png", PNG, content_type="image/png",
                                    idempotency_key="k-ready")
        await ledger.create("held.png", PNG, content_type="image/png", hold=True,
                            idempotency_key="k-held")
        token, [work] = await ledger.held.claim(("content-type",), 1, 600)
        assert await ledger.held.accept(token, work) == "ready"
        again = await ledger.create("ready.png", PNG, content_type="image/png",
                                    idempotency_key="k-ready")
        assert (again.id, again.name) == (ready.id, "ready.png")
        held = await ledger.create("held.png", PNG, content_type="image/png",
                                   idempotency_key="k-held")
        assert held.id == work.document_id and held.status == "ready"

        await ledger.create("gone.png", PNG, content_type="image/png", hold=True,
                            idempotency_key="k-gone")
        token, [work] = await ledger.held.claim(("content-type",), 1, 600)
        assert await ledger.held.reject(token, work, "no") == "rejected"
        again = await ledger.create("ready.png", PNG, content_type="image/png",
                                    idempotency_key="k-ready")
        assert again.id == ready.id
        with pytest.raises(IdempotencyConflict, match="deleted"):
            await ledger.create("gone.png", PNG, content_type="image/png",
                                idempotency_key="k-gone")


async def test_the_purge_removes_rejected_work_only(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger, open_ledger(clock_offset=LEASE_PAST) as later:
        await ledger.create("gone.png", PNG, content_type="image/png", hold=True)
        held = await ledger.create("held.png", PNG, content_type="image/png", hold=True)
        token, [work] = await ledger.held.claim(("content-type",), 1, 600)
        assert work.document_id != held.id
        assert await ledger.held.reject(token, work, "no") == "rejected"
        assert await later.held.purge(60) == 1
        assert await work_states(ledger) == {(held.id, "content-type"): "pending"}
        state = await ledger.hold_state(held.id)
        assert state is not None and state.processors == {"content-type": "pending"}
