"""Held documents on a real database and store: invisible to every read path until every
processor accepted them, deleted through the deletion path when one rejects them, and
decided once, by the worker that holds the claim."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.errors import InvalidInput, NotFound
from blobledger.protocol import events
from blobledger.protocol.documents import Document
from blobledger.protocol.models import BlobRow, BlobState, ProcessingRow
from blobledger.workers.processing import ProcessingWorker
from blobledger.workers.sweeper import Sweeper
from tests.held.conftest import PDF, PNG, SCANNER, LedgerFactory

LEASE_PAST = 700.0  # past the default processing lease (600 s)


async def invisible(ledger: Ledger, doc: Document) -> None:
    """Every library read path answers as for an absent document."""
    with pytest.raises(NotFound):
        await ledger.get(doc.id)
    with pytest.raises(NotFound):
        await ledger.open(doc.id)
    with pytest.raises(NotFound):
        async for _ in ledger.read(doc.id):
            pass
    assert doc.id not in [d.id for d in await ledger.page()]
    assert doc.id not in [d.id async for d in ledger.list()]
    assert doc.id not in [d.id for d in await ledger.page(prefix=doc.name)]


async def work_rows(ledger: Ledger) -> list[ProcessingRow]:
    async with ledger.db.session() as session:
        return list((await session.execute(select(ProcessingRow))).scalars())


async def test_held_until_accepted_then_ready_once(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger:
        doc = await ledger.create("photo.png", PNG, content_type="image/png", hold=True,
                                  owner="w1")
        assert doc.status == "held"
        await invisible(ledger, doc)
        state = await ledger.hold_state(doc.id)
        assert state is not None and state.status == "held" and state.owner == "w1"
        assert state.processors == {"content-type": "pending"}
        report = await ProcessingWorker(ledger).run_once()
        assert (report.claimed, report.ready, report.rejected) == (1, 1, 0)
        ready = await ledger.get(doc.id)
        assert ready.status == "ready" and ready.version == 1 and ready.sha256 == doc.sha256
        assert b"".join([c async for c in ledger.read(doc.id)]) == PNG
        assert await ledger.hold_state(doc.id) is None
        assert await work_rows(ledger) == []
        again = await ProcessingWorker(ledger).run_once()
        assert again.claimed == 0 and again.ready == 0


async def test_rejected_goes_through_the_deletion_path(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger:
        doc = await ledger.create("fake.png", PDF, content_type="image/png", hold=True,
                                  idempotency_key="k-fake")
        report = await ProcessingWorker(ledger).run_once()
        assert report.rejected == 1 and report.ready == 0
        await invisible(ledger, doc)
        state = await ledger.hold_state(doc.id)
        assert state is not None and state.status == "rejected"
        assert state.reason is not None and "application/pdf" in state.reason
        # the writer's systems hear of it: document.rejected, written with the rejection
        async with ledger.db.transaction(readonly=True) as conn:
            written = await events.listing(conn, subject=doc.id, limit=10)
        assert [e.type for e in written] == ["document.rejected"]
        assert written[0].payload == {
            "document_id": doc.id, "bucket": "default", "name": "fake.png", "version": 1,
            "size": len(PDF),
            "content_type": "image/png", "sha256": doc.sha256, "md5": written[0].payload["md5"],
            "blob": doc.blob, "processor": "content-type", "reason": state.reason}
        async with ledger.db.session() as session:
            row = await session.get(BlobRow, doc.blob)
        assert row is not None and row.state == BlobState.DELETING
        swept = await Sweeper(ledger).run_once()
        assert swept.deleted == 1
        assert [info async for info in ledger.store.list(ledger.settings.blob_prefix)] == []
        # the name is free again, and the key no longer answers with the rejected document
        again = await ledger.create("fake.png", PNG, content_type="image/png")
        assert again.status == "ready"
        with pytest.raises(Exception, match="deleted"):
            await ledger.create("fake.png", PDF, content_type="image/png",
                                idempotency_key="k-fake")


async def test_a_worker_whose_lease_lapsed_cannot_decide(open_ledger: LedgerFactory) -> None:
    """A paused worker (its claim's lease lapsed, another worker claimed the row) loses
    both verdicts; the document is decided once, by the owner of the claim."""
    async with open_ledger() as first, open_ledger(clock_offset=LEASE_PAST) as later:
        doc = await first.create("a.png", PNG, content_type="image/png", hold=True)
        token, claimed = await first.held.claim(("content-type",), 4, 600)
        assert len(claimed) == 1
        # nobody else claims it while the lease holds
        assert (await first.held.claim(("content-type",), 4, 600))[1] == []
        token2, claimed2 = await later.held.claim(("content-type",), 4, 600)
        assert [w.attempts for w in claimed2] == [2]
        assert await first.held.reject(token, claimed[0], "late") == "lost"
        assert await first.held.accept(token, claimed[0]) == "lost"
        assert not await first.held.failed(token, claimed[0], "late", 1)
        with pytest.raises(NotFound):
            await first.get(doc.id)
        assert await later.held.accept(token2, claimed2[0]) == "ready"
        # the first worker, woken later still, finds the document settled
        assert await first.held.reject(token, claimed[0], "late") == "gone"
        assert (await first.get(doc.id)).status == "ready"


async def test_each_verdict_decides_its_own_document_only(open_ledger: LedgerFactory) -> None:
    """Two held documents claimed in one batch: rejecting one deletes that document alone
    (by its id, still held at its version) and leaves the other held, undecided, until its
    own verdict makes it ready."""
    async with open_ledger() as ledger:
        first = await ledger.create("first.png", PNG, content_type="image/png", hold=True)
        second = await ledger.create("second.png", PNG, content_type="image/png", hold=True)
        token, claimed = await ledger.held.claim(("content-type",), 4, 600)
        work = {w.document_id: w for w in claimed}
        assert set(work) == {first.id, second.id}
        assert await ledger.held.reject(token, work[first.id], "refused") == "rejected"
        state = await ledger.hold_state(second.id)
        assert state is not None and state.status == "held", state
        assert state.processors == {"content-type": "pending"}
        assert await ledger.held.accept(token, work[second.id]) == "ready"
        assert (await ledger.get(second.id)).status == "ready"
        with pytest.raises(NotFound):
            await ledger.get(first.id)


async def test_every_processor_must_accept(open_ledger: LedgerFactory) -> None:
    async with open_ledger(processors=("content-type", "scan"),
                           scan_command=SCANNER) as ledger:
        clean = await ledger.create("clean.txt", b"hello", content_type="text/plain",
                                    hold=True)
        infected = await ledger.create("bad.txt", b"X5O EICAR test", hold=True,
                                       content_type="text/plain", owner="w")
        assert {(r.document_id, r.processor) for r in await work_rows(ledger)} == {
            (d.id, p) for d in (clean, infected) for p in ("content-type", "scan")}
        report = await ProcessingWorker(ledger, batch=1).run_once()
        assert (report.ready, report.rejected) == (1, 1)
        assert (await ledger.get(clean.id)).status == "ready"
        state = await ledger.hold_state(infected.id)
        assert state is not None and state.status == "rejected"
        assert state.reason == "stream: Eicar-Test-Signature FOUND"


async def test_failing_processor_is_retried_then_rejects(open_ledger: LedgerFactory,
                                                       tmp_path: object) -> None:
    async with open_ledger(processors=("scan",), scan_command="sh -c 'exit 3'",
                           processing_attempts=2) as ledger:
        doc = await ledger.create("x.bin", b"bytes", hold=True)
        first = await ProcessingWorker(ledger).run_once()
        assert first.failed == 1 and first.rejected == 0
        state = await ledger.hold_state(doc.id)
        assert state is not None and state.status == "held"
        assert (await ProcessingWorker(ledger).run_once()).claimed == 0  # backing off
        ledger.clock_offset = 60
        second = await ProcessingWorker(ledger).run_once()
        assert second.failed == 1 and second.rejected == 1
        state = await ledger.hold_state(doc.id)
        assert state is not None and state.status == "rejected"
        assert state.reason is not None and "scan failed 2 times" in state.reason
        assert "exited 3" in state.reason


async def test_hold_policy_and_replace(open_ledger: LedgerFactory) -> None:
    async with open_ledger(hold_prefixes=("inbox/",)) as ledger:
        held = await ledger.create("inbox/a.txt", b"text", content_type="text/plain")
        assert held.status == "held"
        free = await ledger.create("out/a.txt", b"text", content_type="text/plain")
        assert free.status == "ready"
        await ProcessingWorker(ledger).run_once()
        ready = await ledger.get(held.id)
        with pytest.raises(InvalidInput, match="never held"):
            await ledger.replace(ready.id, b"other", expected_version=1)
        replaced = await ledger.replace(free.id, b"other", expected_version=1)
        assert replaced.version == 2
    async with open_ledger(processors=()) as ledger:
        asked = await ledger.create("no-processors.txt", b"x", hold=True)
        assert asked.status == "ready"  # nothing to wait for


async def test_name_after_upload_follows_the_policy(open_ledger: LedgerFactory) -> None:
    async def late() -> str:
        return "inbox/late.txt"

    async with open_ledger(hold_prefixes=("inbox/",)) as ledger:
        doc = await ledger.create(None, b"late", content_type="text/plain",
                                  name_after_upload=late)
        assert doc.status == "held" and doc.name == "inbox/late.txt"


async def test_sweeper_roll_forward_holds(open_ledger: LedgerFactory) -> None:
    """A writer that died after C3: the sweeper's roll-forward makes the creation held,
    with its work, as C4 would have."""
    async with open_ledger() as ledger, open_ledger(clock_offset=400) as later:
        intent = await ledger.begin_create("rolled.png", "image/png", hold=True)
        digests = await ledger.upload(intent, PNG)
        await ledger.confirm(intent)
        await ledger.tag_committed(intent)
        swept = await Sweeper(later).run_once()
        assert swept.rolled_forward == 1
        with pytest.raises(NotFound):
            await later.get(intent.document_id)
        assert [r.processor for r in await work_rows(later)] == ["content-type"]
        # the writer, woken, is answered the held document the sweeper made
        answered = await ledger.commit_create(intent, digests)
        assert (answered.id, answered.status) == (intent.document_id, "held")
        assert (await ProcessingWorker(later).run_once()).ready == 1
        assert (await later.get(intent.document_id)).status == "ready"


async def test_uploads_that_outlive_a_request(open_ledger: LedgerFactory) -> None:
    """A tus upload asks with its metadata; a direct upload is held by the settings'
    prefixes."""
    from blobledger.uploads.resumable import Resumable
    from tests.crash.child import chunks, direct_upload

    async with open_ledger(hold_prefixes=("inbox/",)) as ledger:
        resumable = Resumable(ledger)
        upload = await resumable.create(len(PNG), {"name": "tus.png", "hold": "true",
                                                   "content_type": "image/png"})
        await resumable.append(upload, 0, chunks(PNG))
        doc = await resumable.complete(await resumable.find(upload.id))
        assert isinstance(doc, Document) and doc.status == "held"
        direct_id = await direct_upload(ledger, "inbox/direct.bin", b"direct bytes")
        with pytest.raises(NotFound):
            await ledger.get(direct_id)
        state = await ledger.hold_state(direct_id)
        assert state is not None and state.status == "held"
        assert (await ProcessingWorker(ledger).run_once()).ready == 2
        assert (await ledger.get(direct_id)).status == "ready"


async def test_concurrent_last_verdicts_make_it_ready_once(open_ledger: LedgerFactory) -> None:
    """Two workers record the last two acceptances at once: each verdict locks the document
    first, so exactly one of them sees no processor left and makes it ready."""
    import asyncio

    settings = {"processors": ("content-type", "scan"), "scan_command": "true"}
    async with open_ledger(**settings) as one, open_ledger(**settings) as two:
        doc = await one.create("both.txt", b"text", content_type="text/plain", hold=True)
        token1, [work1] = await one.held.claim(("content-type",), 1, 600)
        token2, [work2] = await two.held.claim(("scan",), 1, 600)
        outcomes = await asyncio.gather(one.held.accept(token1, work1),
                                        two.held.accept(token2, work2))
        assert sorted(outcomes) == ["accepted", "ready"]
        assert (await one.get(doc.id)).status == "ready"
        assert await work_rows(one) == []


async def test_a_rejection_takes_the_variants_made_meanwhile(open_ledger: LedgerFactory) -> None:
    """A processor may make variants of a held document before another rejects it: the
    rejection's transaction hands them to the deletion path with the document's blob."""
    pytest.importorskip("PIL", reason="the images extra (Pillow) makes the variants")
    from blobledger.variants import make_variants
    from tests.variants.images import png

    async with open_ledger(processors=("scan",), scan_command=SCANNER,
                           variants="thumb=16x16") as ledger:
        doc = await ledger.create("photo.png", png() + b"EICAR", content_type="image/png",
                                  hold=True)
        made = await make_variants(ledger, doc.id)
        assert len(made) == 1
        async with ledger.db.session() as session:
            variant = await session.get(BlobRow, made[0].blob)
        assert variant is not None and variant.state == BlobState.ATTACHED
        report = await ProcessingWorker(ledger).run_once()
        assert report.rejected == 1
        async with ledger.db.session() as session:
            rows = {row.name: row.state for row in (await session.execute(
                select(BlobRow))).scalars()}
        assert rows == {doc.blob: BlobState.DELETING, made[0].blob: BlobState.DELETING}
        await Sweeper(ledger).run_once()
        assert [info async for info in ledger.store.list(ledger.settings.blob_prefix)] == []


async def test_each_writer_is_shown_its_own_held_and_rejected_documents(
        open_ledger: LedgerFactory) -> None:
    """``Held.of_owner`` (what the page's Pipeline view lists for a writer): that writer's
    held documents and its rejected ones, never another writer's, never a ready document,
    the limit counting only what it lists; and each document's state is its own rows'."""
    async with open_ledger() as ledger:
        fake = await ledger.create("mine/fake.png", PDF, content_type="image/png", hold=True,
                                   owner="w1")
        theirs = await ledger.create("theirs/fake.png", PDF, content_type="image/png",
                                     hold=True, owner="w2")
        assert (await ProcessingWorker(ledger).run_once()).rejected == 2
        first = await ledger.create("mine/first.png", PNG, content_type="image/png", hold=True,
                                    owner="w1")
        newest = await ledger.create("mine/newest.png", PNG, content_type="image/png",
                                     hold=True, owner="w1")
        await ledger.create("theirs/held.png", PNG, content_type="image/png", hold=True,
                            owner="w2")
        await ledger.create("mine/ready.png", PNG, content_type="image/png", owner="w1")

        listed = await ledger.held.of_owner("w1")
        assert [(s.document_id, s.status) for s in listed] == [
            (newest.id, "held"), (first.id, "held"), (fake.id, "rejected")]
        # one of each: the newest held one, then the rejected one (held ones' work rows,
        # newer than the rejection, do not take the rejected one's place)
        assert [s.document_id for s in await ledger.held.of_owner("w1", limit=1)] == [
            newest.id, fake.id]
        assert [s.name for s in await ledger.held.of_owner("w2")] == [
            "theirs/held.png", "theirs/fake.png"]

        # a document's state is read from its own work rows only
        for doc in (first, newest):
            state = await ledger.hold_state(doc.id)
            assert state is not None and state.processors == {"content-type": "pending"}
        for doc, name in ((fake, "mine/fake.png"), (theirs, "theirs/fake.png")):
            state = await ledger.hold_state(doc.id)
            assert state is not None and (state.status, state.name) == ("rejected", name)
