"""The sweeper and the deletion path, every branch, on {SQLite, PostgreSQL} x {disk, Azurite}."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import update

from blobledger import IdempotencyInProgress, Ledger, failpoints
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.errors import SweeperBusy
from blobledger.failpoints import FailpointError
from blobledger.protocol.documents import Document
from blobledger.protocol.models import (
    BlobKind,
    BlobRow,
    BlobState,
    UploadMode,
    UploadRow,
    utcnow,
)
from blobledger.uploads.resumable import Resumable
from blobledger.workers.sweeper import Sweeper, SweepReport, sweep_forever
from tests.ledger.test_guards import SMALL_PARTS
from tests.sweeper.support import HOUR, documents, one, rows, seed_intent, stored

PENDING = {"state": "pending"}


def later(ledger: Ledger, seconds: float) -> None:
    """Move the ledger's clock ``seconds`` ahead of real time."""
    ledger.clock_offset = seconds


async def read(ledger: Ledger, doc_id: str) -> bytes:
    return b"".join([chunk async for chunk in ledger.read(doc_id)])


async def test_stale_creations_are_swept(ledger: Ledger) -> None:
    no_blob = await seed_intent(ledger, tag=None)  # died after C1
    pending = await seed_intent(ledger, tag="pending")  # died after C2
    report = await Sweeper(ledger).run_once()
    assert (report.swept, report.absent, report.errors, report.refused) == (2, 1, 0, 0)
    assert await rows(ledger) == {}
    assert await documents(ledger) == {}
    assert await stored(ledger) == {}
    assert no_blob != pending


async def test_committed_creation_rolls_forward(ledger: Ledger) -> None:
    data = b"complete bytes, tagged committed"
    name = await seed_intent(ledger, tag="committed", data=data)  # died after C3
    report = await Sweeper(ledger).run_once()
    assert (report.rolled_forward, report.swept, report.errors) == (1, 0, 0)
    assert await rows(ledger) == {name: "committed"}
    (doc_id, (status, blob)), = (await documents(ledger)).items()
    assert (status, blob) == ("ready", name)
    doc = await ledger.get(doc_id)
    assert (doc.size, doc.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert await read(ledger, doc_id) == data
    assert await stored(ledger) == {name: "committed"}


async def test_committed_creations_claimed_together_roll_forward_each_on_its_own(
    ledger: Ledger,
) -> None:
    """Two creations whose writers died after C3, claimed by one sweep (one token for both):
    each roll-forward commits its own row with its own digests, and both documents become
    ready with their own bytes."""
    data = {await seed_intent(ledger, tag="committed", data=d): d
            for d in (b"the first creation's bytes", b"the second, longer, creation's bytes")}
    report = await Sweeper(ledger).run_once()
    assert (report.rolled_forward, report.swept, report.errors) == (2, 0, 0), report
    assert await rows(ledger) == dict.fromkeys(data, "committed")
    for doc_id, (status, blob) in (await documents(ledger)).items():
        doc = await ledger.get(doc_id)
        assert (status, doc.blob) == ("ready", blob)
        assert (doc.size, doc.sha256) == (len(data[blob]),
                                          hashlib.sha256(data[blob]).hexdigest())
        assert await read(ledger, doc_id) == data[blob]


async def test_replacements_swept_or_handed_to_the_deletion_path(ledger: Ledger) -> None:
    doc = await ledger.create("kept.txt", b"version one")
    pending = await seed_intent(ledger, tag="pending", kind=BlobKind.REPLACE, doc_id=doc.id)
    committed = await seed_intent(ledger, tag="committed", kind=BlobKind.REPLACE,
                                  doc_id=doc.id)
    absent = await seed_intent(ledger, tag=None, kind=BlobKind.REPLACE, doc_id=doc.id)
    grace = ledger.settings.delete_grace
    ledger.settings = ledger.settings.with_(delete_grace=HOUR)  # not past it within this run
    report = await Sweeper(ledger).run_once()
    ledger.settings = ledger.settings.with_(delete_grace=grace)
    assert (report.swept, report.moved_to_deleting, report.errors) == (2, 1, 0)
    assert await rows(ledger) == {doc.blob: "committed", committed: "deleting"}
    assert pending not in await stored(ledger) and absent not in await stored(ledger)
    later(ledger, 1)  # past the grace period (0 in these settings)
    report = await Sweeper(ledger).run_once()
    assert (report.deleted, report.refused, report.errors) == (1, 0, 0)
    assert await rows(ledger) == {doc.blob: "committed"}
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await read(ledger, doc.id) == b"version one"


async def test_fresh_and_leased_intents_are_left_alone(ledger: Ledger) -> None:
    fresh = await seed_intent(ledger, tag="pending", age=60)  # younger than sweep_after
    leased = await seed_intent(ledger, tag="pending", lease_in=HOUR)  # an upload owns it
    report = await Sweeper(ledger).run_once()
    assert report.claimed == 0
    assert await rows(ledger) == {fresh: "pending", leased: "pending"}
    later(ledger, 2 * HOUR)  # the clock passes both cutoffs
    report = await Sweeper(ledger).run_once()
    assert report.swept == 2
    assert await rows(ledger) == {}


async def test_deletion_path_after_replace_and_delete(ledger: Ledger) -> None:
    doc = await ledger.create("gone.txt", b"one")
    new = await ledger.replace(doc.id, b"two", expected_version=1)
    other = await ledger.create("other.txt", b"stays")
    await ledger.delete(doc.id, expected_version=2)
    assert set((await rows(ledger)).values()) == {"deleting", "committed"}
    later(ledger, 2 * HOUR)  # past the grace and past the uploads' own leases
    report = await Sweeper(ledger).run_once()
    assert (report.deleted, report.absent, report.refused, report.errors) == (2, 0, 0, 0)
    assert await rows(ledger) == {other.blob: "committed"}
    assert await stored(ledger) == {other.blob: "committed"}
    assert doc.blob != new.blob


async def test_deletion_path_resumes_after_a_crash_at_any_step(ledger: Ledger) -> None:
    tagged = await seed_intent(ledger, tag="deleting", state=BlobState.DELETING)  # after tag
    absent = await seed_intent(ledger, tag=None, state=BlobState.DELETING)  # after delete
    report = await Sweeper(ledger).run_once()
    assert (report.deleted, report.absent, report.refused, report.errors) == (2, 1, 0, 0)
    assert await rows(ledger) == {}
    assert await stored(ledger) == {}
    assert tagged != absent


async def test_deletion_guard_refuses_and_goes_on(ledger: Ledger) -> None:
    doc = await ledger.create("live.txt", b"live bytes")
    # An abandoned upload: its row left pending for deleting by compare-and-set, so no
    # writer can commit it; its blob, still tagged pending, is deleted under that tag.
    abandoned = await seed_intent(ledger, tag="pending", state=BlobState.DELETING)
    fine = await seed_intent(ledger, tag="committed", state=BlobState.DELETING)
    async with ledger.db.session() as session:  # a bug: the live document's row is deleting
        await session.execute(update(BlobRow).where(BlobRow.name == doc.blob).values(
            state=BlobState.DELETING, changed_at=utcnow() - timedelta(hours=1)))
    later(ledger, 2 * HOUR)
    report = await Sweeper(ledger).run_once()
    assert (report.refused, report.deleted, report.errors) == (1, 2, 0)
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await read(ledger, doc.id) == b"live bytes"
    assert fine not in await rows(ledger) and abandoned not in await rows(ledger)


async def test_the_deletion_path_never_retags_a_blob_tagged_otherwise(ledger: Ledger) -> None:
    """The deletion path tags ``deleting`` only a blob tagged ``committed`` (its tag update
    is conditioned on it): a ``deleting`` row whose blob carries another state (written
    behind the ledger's back) is refused, its bytes, tag and row kept, never retagged
    ``deleting`` and then deleted under that tag."""
    odd = await seed_intent(ledger, tag="elsewhere", state=BlobState.DELETING)
    later(ledger, 2 * HOUR)
    report = await Sweeper(ledger).run_once()
    assert (report.refused, report.deleted, report.errors) == (1, 0, 0), report
    assert await stored(ledger) == {odd: "elsewhere"}
    assert odd in await rows(ledger)


async def test_a_ready_blob_marked_stale_is_never_deleted(ledger: Ledger) -> None:
    """A bug marks a live document's committed row as a stale pending replacement: the
    storage guard refuses the delete, the row goes to the deletion path, whose database
    check refuses again. The bytes survive."""
    doc = await ledger.create("precious.txt", b"precious")
    async with ledger.db.session() as session:
        await session.execute(update(BlobRow).where(BlobRow.name == doc.blob).values(
            state=BlobState.PENDING, kind=BlobKind.REPLACE,
            changed_at=utcnow() - timedelta(hours=3), lease_until=utcnow()))
    later(ledger, 2 * HOUR)
    report = await Sweeper(ledger).run_once()
    assert (report.swept, report.moved_to_deleting, report.deleted) == (0, 1, 0)
    later(ledger, 3 * HOUR)
    report = await Sweeper(ledger).run_once()
    assert (report.refused, report.deleted) == (1, 0)
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await read(ledger, doc.id) == b"precious"


async def test_storage_guard_holds_inside_a_delete_batch(ledger: Ledger) -> None:
    pending = [await seed_intent(ledger, tag="pending") for _ in range(3)]
    keep = [await seed_intent(ledger, tag="committed", state=BlobState.COMMITTED)
            for _ in range(3)]
    items = [(name, PENDING) for pair in zip(pending, keep, strict=True) for name in pair]
    outcomes = await ledger.store.delete_many(items)
    assert [o.name for o in outcomes] == [name for name, _ in items]
    assert {o.name for o in outcomes if o.deleted} == set(pending)
    assert {o.name for o in outcomes if o.error is not None} == set(keep)
    assert await stored(ledger) == dict.fromkeys(keep, "committed")


async def test_sweeper_claim_excludes_a_resuming_upload(ledger: Ledger) -> None:
    await seed_intent(ledger, tag=None, key="resume-me", doc_name="resume.txt")
    failpoints.configure("sweep.after_claim=raise")  # the sweeper stops right after claiming
    try:
        with pytest.raises(FailpointError):
            await Sweeper(ledger).run_once()
    finally:
        failpoints.configure("")
    with pytest.raises(IdempotencyInProgress):  # the sweeper owns the intent now
        await ledger.create("resume.txt", b"data", idempotency_key="resume-me",
                            content_type="text/plain")
    later(ledger, 2 * HOUR)  # the sweeper's lease expired: a later run finishes the job
    assert (await Sweeper(ledger).run_once()).swept == 1
    assert await rows(ledger) == {}


async def test_a_resuming_upload_excludes_the_sweeper(ledger: Ledger) -> None:
    name = await seed_intent(ledger, tag=None, key="mine")
    async with ledger.db.session() as session:  # what a resumed attempt's claim leaves
        await session.execute(update(BlobRow).where(BlobRow.name == name).values(
            lease_until=utcnow() + timedelta(seconds=60)))
    report = await Sweeper(ledger).run_once()
    assert report.claimed == 0
    assert await rows(ledger) == {name: "pending"}


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
async def test_one_sweeper_per_sqlite_database(ledger: Ledger) -> None:
    first, second = Sweeper(ledger), Sweeper(ledger)
    async with first.exclusive():
        with pytest.raises(SweeperBusy, match="another sweeper"):
            await second.run_once()
        assert (await first.run_once()).errors == 0  # re-entrant for its holder
    assert (await second.run_once()).errors == 0


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
async def test_sweep_forever_runs_until_stopped(ledger: Ledger) -> None:
    stop = asyncio.Event()
    reports: list[SweepReport] = []
    await seed_intent(ledger, tag="pending")

    def seen(report: SweepReport) -> None:
        reports.append(report)
        if len(reports) == 2:
            stop.set()

    await asyncio.wait_for(
        sweep_forever(ledger, interval=0.05, batch=10, stop=stop, on_report=seen), 30)
    assert [r.swept for r in reports] == [1, 0]
    assert await rows(ledger) == {}


async def test_batches_loop_until_no_work_is_left(ledger: Ledger) -> None:
    for _ in range(7):
        await seed_intent(ledger, tag="pending")
    report = await Sweeper(ledger, batch=3).run_once()
    assert (report.swept, report.batches) == (7, 3), report
    assert await rows(ledger) == {}


async def test_a_swept_intent_takes_only_its_own_pending_key(ledger: Ledger) -> None:
    """A stale intent under a key is swept while another creation under a key of its own is
    in flight: the sweep drops the stale intent's key and no other, so the creation in
    flight keeps its reservation."""
    await seed_intent(ledger, tag=None, key="k-stale")
    fresh = await ledger.begin_create("fresh.txt", "text/plain", "k-fresh")
    report = await Sweeper(ledger).run_once()
    assert (report.swept, report.errors) == (1, 0), report
    assert await ledger.transitions.find_key("k-stale") is None
    kept = await ledger.transitions.find_key("k-fresh")
    assert kept is not None and kept.blob_name == fresh.blob_name


async def test_a_swept_intent_takes_only_its_own_upload_row(ledger: Ledger) -> None:
    """A stale intent is swept while a resumable upload is open: the sweep drops the stale
    intent's rows and no other upload's, so the upload in flight goes on."""
    await seed_intent(ledger, tag=None)
    upload = await Resumable(ledger).create(5, {"name": "in-flight.txt"})
    report = await Sweeper(ledger).run_once()
    assert (report.swept, report.errors) == (1, 0), report
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open" and found.blob_name == upload.blob_name


async def test_a_fenced_staged_attachment_takes_only_its_own_upload_row(
        ledger: Ledger) -> None:
    """A stale staged attachment is fenced to the deletion path while a resumable upload is
    open: the fence drops the attachment's upload rows and no other, so the upload in flight
    goes on."""
    await seed_intent(ledger, tag="pending", kind=BlobKind.ATTACHMENT)
    upload = await Resumable(ledger).create(5, {"name": "in-flight.txt"})
    report = await Sweeper(ledger).run_once()
    assert (report.fenced, report.errors) == (1, 0), report
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open" and found.blob_name == upload.blob_name


async def test_a_rolled_forward_creation_closes_only_its_own_upload_row(
        ledger: Ledger) -> None:
    """A creation whose writer stopped after C3 is rolled forward while a resumable upload
    is open: the roll-forward closes the creation's upload rows and no other, so the upload
    in flight stays open."""
    await seed_intent(ledger, tag="committed")
    upload = await Resumable(ledger).create(5, {"name": "in-flight.txt"})
    report = await Sweeper(ledger).run_once()
    assert (report.rolled_forward, report.errors) == (1, 0), report
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open" and found.blob_name == upload.blob_name


async def test_a_discarded_self_tagged_upload_takes_only_its_own_rows(ledger: Ledger) -> None:
    """A direct upload expired with its blob tagged committed by the client itself (never
    verified by the service) is discarded while a resumable upload is open: the discard
    drops its own pending document and upload row and no other, so the upload in flight
    keeps its document and goes on."""
    doc_id = new_document_id()
    name = await seed_intent(ledger, tag="committed", doc_id=doc_id)
    then = await ledger.now() - timedelta(seconds=HOUR)
    async with ledger.db.session() as session:
        session.add(UploadRow(
            id=new_document_id(), mode=UploadMode.DIRECT, blob_name=name, document_id=doc_id,
            attempt="unverified", state="open", length=12, offset=0, handle="", parts="[]",
            meta="{}", sha256=None, created_at=then, changed_at=then,
            expires_at=then + timedelta(seconds=HOUR / 2)))
        await session.commit()
    upload = await Resumable(ledger).create(5, {"name": "in-flight.txt"})
    report = await Sweeper(ledger).run_once()
    assert (report.rolled_forward, report.moved_to_deleting, report.errors) == (0, 1, 0), \
        report
    assert doc_id not in await documents(ledger)
    assert (await documents(ledger))[upload.document_id] == ("pending", upload.blob_name)
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open" and found.blob_name == upload.blob_name


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_a_fenced_staged_attachment_aborts_only_its_own_parts(ledger: Ledger) -> None:
    """A stale staged attachment is fenced while a resumable upload holds stored parts: the
    sweep aborts the attachment's staged parts and no other upload's, so the upload in
    flight completes with its bytes."""
    await seed_intent(ledger, tag="pending", kind=BlobKind.ATTACHMENT)
    resumable = Resumable(ledger, segment=8)
    data = b"parts of an upload in flight"
    upload = await resumable.create(len(data), {"name": "in-flight.txt"})

    async def body() -> AsyncIterator[bytes]:
        yield data

    assert await resumable.append(upload, 0, body()) == len(data)
    report = await Sweeper(ledger).run_once()
    assert (report.fenced, report.errors) == (1, 0), report
    doc = await resumable.complete(await resumable.find(upload.id))
    assert isinstance(doc, Document) and doc.name == "in-flight.txt"
    assert b"".join([chunk async for chunk in ledger.read(doc.id)]) == data


async def test_stale_intents_behind_older_unclaimable_rows_are_swept(ledger: Ledger) -> None:
    """A batch of one, and older than the stale intent: a ready document's committed row
    and a pending row whose writer is still within its lease. Neither can be claimed, so
    neither may take the batch's place: the stale intent is swept in this run, the others
    are left as they are."""
    ledger.clock_offset = -3 * HOUR
    doc = await ledger.create("old.txt", b"an old document")
    ledger.clock_offset = 0
    live = await seed_intent(ledger, tag="pending", age=2 * HOUR, lease_in=HOUR)
    stale = await seed_intent(ledger, tag="pending", age=HOUR)
    report = await Sweeper(ledger, batch=1).run_once()
    assert (report.swept, report.errors) == (1, 0), report
    assert await rows(ledger) == {doc.blob: BlobState.COMMITTED, live: BlobState.PENDING}
    assert stale not in await stored(ledger)


async def test_a_stale_staged_attachment_is_fenced_alone_beside_a_rolled_forward_creation(
    ledger: Ledger,
) -> None:
    """One sweep claims a stale staged attachment and a creation whose writer stopped after
    C3: the attachment alone goes to the deletion path, and the creation is rolled
    forward to its ready document."""
    staged = await seed_intent(ledger, tag="pending", kind=BlobKind.ATTACHMENT)
    created = await seed_intent(ledger, tag="committed")
    report = await Sweeper(ledger).run_once()
    assert (report.fenced, report.rolled_forward, report.errors) == (1, 1, 0), report
    assert [status for status, blob in (await documents(ledger)).values()
            if blob == created] == ["ready"]
    assert staged not in await rows(ledger)


async def test_the_deletion_path_refuses_nothing_for_an_attachment_held_elsewhere(
    ledger: Ledger,
) -> None:
    """The deletion path runs while an attachment of another owner is attached: it deletes
    the deleted document's blob and reports no refusal (the attached blob is not one of
    the rows it claimed)."""
    now = await ledger.now()
    held = new_blob_name(ledger.settings.blob_prefix, "held.txt")
    async with ledger.db.session() as session:
        session.add(BlobRow(
            name=held, document_id=None, kind=BlobKind.ATTACHMENT, state=BlobState.ATTACHED,
            content_type="text/plain", attempt=None, owner_table="invoices", owner_key="7",
            owner_column="scan", lease_until=now, created_at=now - timedelta(seconds=HOUR),
            changed_at=now - timedelta(seconds=HOUR)))
        await session.commit()
    await ledger.store.put(held, one(b"attached elsewhere"), tags={"state": "committed"})
    doc = await ledger.create("deleted.txt", b"deleted bytes")
    await ledger.delete(doc.id, expected_version=doc.version)
    ledger.clock_offset = 1
    report = await Sweeper(ledger).run_once()
    assert (report.deleted, report.refused, report.errors) == (1, 0, 0), report
    assert await rows(ledger) == {held: BlobState.ATTACHED}
    assert await stored(ledger) == {held: "committed"}


async def test_a_discarded_self_tagged_upload_leaves_a_committed_creation_beside_it(
        ledger: Ledger) -> None:
    """One sweep claims a direct upload whose client tagged its blob committed itself (never
    verified by the service) and a creation whose writer stopped after C3: the upload alone
    is discarded to the deletion path, and the creation is rolled forward to its ready
    document."""
    doc_id = new_document_id()
    discarded = await seed_intent(ledger, tag="committed", doc_id=doc_id)
    then = await ledger.now() - timedelta(seconds=HOUR)
    async with ledger.db.session() as session:
        session.add(UploadRow(
            id=new_document_id(), mode=UploadMode.DIRECT, blob_name=discarded,
            document_id=doc_id, attempt="unverified", state="open", length=12, offset=0,
            handle="", parts="[]", meta="{}", sha256=None, created_at=then, changed_at=then,
            expires_at=then + timedelta(seconds=HOUR / 2)))
        await session.commit()
    created = await seed_intent(ledger, tag="committed")
    report = await Sweeper(ledger).run_once()
    assert (report.rolled_forward, report.moved_to_deleting, report.errors) == (1, 1, 0), \
        report
    found = await documents(ledger)
    assert doc_id not in found
    assert [status for status, blob in found.values() if blob == created] == ["ready"]


@pytest.mark.parametrize("state", [BlobState.PENDING, BlobState.DELETING])
async def test_a_blob_published_after_its_row_was_deleted_from_goes_with_the_row(
        ledger: Ledger, state: str) -> None:
    """A paused writer (a completion publishing its parts, a client's put) whose intent the
    sweeper takes (``pending``, stale) or the deletion path removes (``deleting``,
    abandoned) publishes its blob after the blob's delete found nothing and before the row
    is removed: the writer, seeing the row still there, leaves the blob to the sweeper, and
    the sweeper's delete after the row's removal takes it (``late``), conditioned on
    ``pending``. Without it the blob would have no row for any sweep to find."""
    name = await seed_intent(ledger, tag=None, state=state)
    published: list[str] = []

    async def publish_late(point: str) -> None:
        if point in ("sweep.after_delete", "deletion.after_delete") and not published:
            published.append(point)
            await ledger.store.put(name, one(b"published late"), tags=PENDING,
                                   content_type="text/plain")

    later(ledger, 2 * HOUR)
    failpoints.set_hook(publish_late)
    try:
        report = await Sweeper(ledger).run_once()
    finally:
        failpoints.set_hook(None)
    assert published
    assert report.late == 1, report
    assert await rows(ledger) == {}
    assert await stored(ledger) == {}
