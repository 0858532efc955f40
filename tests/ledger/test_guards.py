"""The guards no other test needed: each interleaving below is one that only a single
compare-and-set term (or re-check) decides, and each test asserts the harm its absence does
(``scripts/mutate`` weakens the guard and checks that the test fails):

- C4 (``_commit_blob``) requires the attempt's token: a writer paused after its confirm,
  while a sweeper on S3 has read the blob's tags and is about to delete it, must not commit;
- ``abandon`` requires it too: a stale attempt's failure path must not take the intent of
  the retry that took it over;
- ``remove_swept`` requires the claim's token: a sweeper paused after its delete must not
  remove the rows of a retry that resumed the intent meanwhile;
- ``record_parts`` requires the offset the request saw: of two requests at one offset, one
  wins and the other stores nothing;
- the reconciler reads the row again right before it deletes an orphan;
- confirm requires the token (a stale attempt or a stager loses to a retry or a claim),
  a takeover names the intent it takes (an older release's rows share a NULL token), C4
  after a claim commits the writer's own row only and never a fenced one, C4 and the
  failure path touch the request's own key only, and a give-up loses to a claim or to a
  verification committed under it;
- a writer that finds its step failed asks whether the intent is still its own by its
  token: a completion whose blob a claiming sweeper deleted before its C3 is told it lost;
- on S3 the sweeper's fence requires its claim's token: a sweeper woken after another
  claimed the intent (and read the tag a writer's C3 wrote since) fences nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import delete, select, text, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger import Ledger, failpoints
from blobledger._base.names import new_blob_name
from blobledger.errors import (
    IdempotencyInProgress,
    IntegrityError,
    IntentLost,
    OffsetMismatch,
    PreconditionFailed,
)
from blobledger.protocol.documents import Document
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow, UploadRow
from blobledger.protocol.transitions import Transitions
from blobledger.stores.s3 import S3Store
from blobledger.uploads.resumable import Resumable
from blobledger.workers import reconciler
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import SWEEP_LEASE, Sweeper
from tests.ledger.test_fencing import (
    outcome,
    read,
    rows,
    started,
    stored,
    sweep_past_everything,
)
from tests.support.holds import STEP, Holds
from tests.sweeper.support import HOUR, one, seed_intent

SEGMENT = 64 * 1024
#: every backend whose store takes parts this small (S3's must hold 5 MiB)
SMALL_PARTS = ["sqlite-local", "sqlite-azure", "postgresql-local", "postgresql-azure"]
POSTGRESQL = ["postgresql-local", "postgresql-azure", "postgresql-s3"]


async def settled_ok(ledger: Ledger) -> None:
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


@pytest.fixture
def paused_s3_deletes(ledger: Ledger, holds: Holds,
                      monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """S3's delete reads the tags, then deletes under If-Match on the ETag: the point
    ``s3.after_tags_read`` holds a delete (or a retag) between the two."""
    store = ledger.store
    assert isinstance(store, S3Store)
    real = store._all_tags

    async def tags_then_hold(name: str) -> dict[str, str]:
        tags = await real(name)
        await holds.hit("s3.after_tags_read")
        return tags

    monkeypatch.setattr(store, "_all_tags", tags_then_hold)
    yield "s3.after_tags_read"


@pytest.mark.parametrize("backend", ["postgresql-s3"], indirect=True)
async def test_a_writer_woken_inside_a_sweepers_tag_read_keeps_its_document(
    ledger: Ledger, holds: Holds, paused_s3_deletes: str
) -> None:
    """The writer is held after its confirm, past its lease; the sweeper claims the intent,
    reads its tag (pending) and is held before it decides. The writer wakes: its C3 retag
    goes through (S3 cannot condition it), and its C4 on the claimed, undecided row makes the
    roll-forward the sweeper would make: the writer gets its document. The sweeper's fence
    then loses (the row is committed): it deletes nothing, and the bytes stay readable. (On
    S3 the sweeper decides in the database before any delete: a delete here would have
    destroyed the acknowledged bytes.)"""
    data = b"bytes the sweeper must not delete"
    holds.at("create.after_confirm")
    writer = started(lambda: ledger.create("stale.txt", data))
    await holds.wait("create.after_confirm")
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    holds.at(paused_s3_deletes)
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait(paused_s3_deletes)
    holds.go("create.after_confirm")
    result = await outcome(writer)
    holds.go(paused_s3_deletes)
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert isinstance(result, Document), result
    assert report.swept == 0 and report.errors == 0, report
    assert await read(ledger, result.id) == data
    assert await stored(ledger) == {result.blob: "committed"}
    await settled_ok(ledger)


async def test_a_stale_attempts_failure_leaves_the_retrys_intent_alone(
    ledger: Ledger, holds: Holds
) -> None:
    """Attempt A is held after its upload past its lease and the margin; retry B (same key)
    takes the intent over and is held at the same step; A wakes to a failure (a failpoint
    raises) and its failure path runs: ``abandon`` must lose (the intent is B's), so A is
    told IntentLost and B finishes with its document. An abandon without the token would
    move B's intent to the deletion path and delete the bytes B resumed."""
    data = b"the bytes both attempts send"
    holds.at("create.after_upload")
    first = started(lambda: ledger.create("taken.txt", data, idempotency_key="k-taken"))
    await holds.wait("create.after_upload")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    holds.at("create.after_upload")
    retry = started(lambda: ledger.create("taken.txt", data, idempotency_key="k-taken"))
    await holds.wait("create.after_upload", 2)
    failpoints.configure("create.after_upload=raise")
    try:
        holds.go("create.after_upload", 0)
        stale = await outcome(first)
    finally:
        failpoints.configure("")
    holds.go("create.after_upload", 1)
    doc = await outcome(retry)
    assert isinstance(doc, Document), doc
    assert await read(ledger, doc.id) == data
    assert isinstance(stale, IntentLost), stale
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await rows(ledger) == {doc.blob: "committed"}
    await settled_ok(ledger)


async def test_a_retry_waits_while_a_sweeper_holds_the_intent_past_its_lease(
    ledger: Ledger, holds: Holds
) -> None:
    """A dead attempt's intent (under a key, its blob pending): the sweeper claims it,
    deletes the blob and is held before removing the rows, past its own lease and the
    margin. A retry under the key is told the attempt is in progress: a claimed intent is
    never taken over by a writer. The sweeper wakes and removes the rows; the retry then
    creates the document afresh."""
    await seed_intent(ledger, tag=BlobState.PENDING, key="k-resumed", age=HOUR)
    holds.at("sweep.after_delete")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_delete")
    ledger.clock_offset = (SWEEP_LEASE + Transitions(ledger.db, ledger.settings)
                           .takeover_margin + 1)
    data = b"sent again by the retry"
    fenced = not ledger.store.capabilities.state_conditioned_delete
    if fenced:  # S3: the sweeper fenced the intent (and dropped its key) before deleting
        doc = await ledger.create("resumed.txt", data, content_type="text/plain",
                                  idempotency_key="k-resumed")
    else:
        with pytest.raises(IdempotencyInProgress):
            await ledger.create("resumed.txt", data, content_type="text/plain",
                                idempotency_key="k-resumed")
    holds.go("sweep.after_delete")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert report.swept == 1, report
    if not fenced:
        doc = await ledger.create("resumed.txt", data, content_type="text/plain",
                                  idempotency_key="k-resumed")
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}
    await settled_ok(ledger)


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _completed_past_a_sweepers_claim(
    ledger: Ledger, holds: Holds, data: bytes, meta: dict[str, str]
) -> tuple[Any, object, asyncio.Task[Any]]:
    """A tus upload of ``data`` whose completion published its parts and was held there
    past the upload's expiry, while a sweeper claimed its intent and is held before
    deciding; the completion then woke. The upload, the completion's outcome and the held
    sweeper (``sweep.after_claim`` still held)."""
    resumable = Resumable(ledger, segment=SEGMENT)
    upload = await resumable.create(len(data), meta)
    assert await resumable.append(upload, 0, _body(data)) == len(data)
    upload = await resumable.find(upload.id)
    holds.at("tus.after_publish")
    completion = started(lambda: resumable.complete(upload))
    await holds.wait("tus.after_publish")
    ledger.clock_offset = ledger.settings.resumable_expiry + ledger.settings.sweep_after + 1
    holds.at("sweep.after_claim")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_claim")
    holds.go("tus.after_publish")
    return upload, await outcome(completion), sweeper


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_of_two_requests_at_one_offset_one_wins_and_the_other_stores_nothing(
    ledger: Ledger, holds: Holds
) -> None:
    """Two PATCH requests at offset 0 of one tus upload, on two instances, with different
    bytes: the first stores its part and is held before recording it; the second stores
    and records its own and is acknowledged. The first must then lose (OffsetMismatch: the
    offset moved since it looked), and the completed document holds the acknowledged
    request's bytes. Without the offset in the compare-and-set both would be acknowledged
    and the late one's parts recorded over the winner's."""
    resumable = Resumable(ledger, segment=SEGMENT)
    late, winner = b"L" * SEGMENT, b"W" * SEGMENT
    upload = await resumable.create(len(winner), {"filename": "raced.bin"})
    holds.at("tus.after_part")
    first = started(lambda: resumable.append(upload, 0, _body(late)))
    await holds.wait("tus.after_part")
    other = Resumable(ledger, segment=SEGMENT)  # another instance (in one, requests take turns)
    assert await other.append(await other.find(upload.id), 0, _body(winner)) == len(winner)
    holds.go("tus.after_part")
    lost = await outcome(first)
    assert isinstance(lost, OffsetMismatch), lost
    doc = await resumable.complete(await resumable.find(upload.id))
    assert isinstance(doc, Document)
    assert await read(ledger, doc.id) == winner


async def test_the_reconciler_keeps_an_orphan_whose_row_appears_before_its_delete(
    ledger: Ledger, holds: Holds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob tagged pending with no row, old enough for ``reconcile --fix``: the reconciler
    reads the row (none) and is held there; a row for the name appears (an intent recorded
    under it); the reconciler must read the row again right before the delete and keep the
    blob. Without the re-check it deletes the bytes the row refers to."""
    name = new_blob_name(ledger.settings.blob_prefix, "late-row.txt")
    await ledger.store.put(name, one(b"bytes a row now refers to"),
                           tags={"state": BlobState.PENDING})
    real = reconciler._row_state

    async def read_then_hold(of: Ledger, blob: str) -> tuple[str, bool] | None:
        state = await real(of, blob)
        if blob == name:
            await holds.hit("reconcile.after_row_read")
        return state

    monkeypatch.setattr(reconciler, "_row_state", read_then_hold)
    older_than = 2 * ledger.settings.upload_deadline
    ledger.clock_offset = older_than + 1
    holds.at("reconcile.after_row_read")
    run = started(lambda: reconciler.reconcile(ledger, fix=True, older_than=older_than,
                                               blocks=False))
    await holds.wait("reconcile.after_row_read")
    await seed_intent(ledger, tag=None, name=name, age=0, lease_in=HOUR)
    holds.go("reconcile.after_row_read")
    report = await asyncio.wait_for(run, STEP)
    assert (report.fixed, report.kept) == (0, 1), report
    assert name in await stored(ledger)
    assert await rows(ledger) == {name: BlobState.PENDING}


async def test_the_reconciler_reports_nothing_for_a_document_deleted_mid_scan(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconciler read a ready document's row in its page; before the store listing
    reaches the name, the document is deleted and the deletion path removes its blob and
    row (a busy service does this all the time). Merged, the row has no blob: the
    reconciler must read the row again, find it gone and count it in flight, never report a
    ready document's blob missing (exit code 2) nor fail."""
    doc = await ledger.create("deleted-mid-scan.txt", b"bytes deleted during the scan")
    deleted = asyncio.Event()
    pages, listing = reconciler._rows, ledger.store.list

    async def page_then_delete(of: Ledger, prefix: str) -> AsyncIterator[Any]:
        async for row in pages(of, prefix):
            if row.name == doc.blob:
                await ledger.delete(doc.id)
                ledger.clock_offset = 1.0
                await Sweeper(ledger).run_once()
                deleted.set()
            yield row

    async def list_after(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        await asyncio.wait_for(deleted.wait(), STEP)
        async for info in listing(*args, **kwargs):
            yield info

    monkeypatch.setattr(reconciler, "_rows", page_then_delete)
    monkeypatch.setattr(ledger.store, "list", list_after)
    report = await asyncio.wait_for(
        reconciler.reconcile(ledger, fix=False, older_than=2 * ledger.settings.upload_deadline),
        STEP)
    assert (report.missing_ready, report.missing, report.total) == (0, 0, 0), report
    assert report.in_flight == 1, report
    assert await rows(ledger) == {} and await stored(ledger) == {}


async def test_c1_under_a_key_still_retained_never_drops_its_first_response(
    ledger: Ledger,
) -> None:
    """Two requests under one key: the second looked the key up before the first finished,
    and reaches C1 after it. C1 drops only a key past its retention; this one is live, so
    C1 fails on the key (the caller then looks it up again and answers the first response)
    and a retry still gets the first document, never a second one."""
    first = await ledger.create("first-response.txt", b"first", idempotency_key="k-live")
    with pytest.raises(DBIntegrityError):
        await ledger.begin_create("second-document.txt", "application/octet-stream", "k-live")
    assert await ledger.create("first-response.txt", b"first", idempotency_key="k-live") \
        == first
    assert [d.id async for d in ledger.list()] == [first.id]


@pytest.mark.parametrize("sweeper_at", ["deletion.after_claim", "sweep.after_claim"])
async def test_a_stager_woken_after_the_sweeper_took_its_blob_is_told_so(
    ledger: Ledger, holds: Holds, sweeper_at: str
) -> None:
    """A stager is held after its upload past its lease; the sweeper claims the staged
    intent and is held before fencing it (``sweep.after_claim``: the row is still pending,
    but no longer under the stager's token), or fences it (``pending -> deleting``) and is
    held before deleting the blob (``deletion.after_claim``). The stager wakes: its confirm
    must lose, so it is told IntentLost rather than handed a staged blob the sweeper goes
    on to delete (whose A4 could only fail)."""
    holds.at("stage.after_upload")
    stager = started(lambda: ledger.stage(b"staged, then taken"))
    await holds.wait("stage.after_upload")
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    holds.at(sweeper_at)
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait(sweeper_at)
    holds.go("stage.after_upload")
    result = await outcome(stager)
    holds.go(sweeper_at)
    report = await outcome(sweeper)
    assert isinstance(result, IntentLost), result
    assert not isinstance(report, BaseException), report
    assert (report.fenced, report.deleted) == (1, 1), report
    assert await stored(ledger) == {} and await rows(ledger) == {}


@pytest.mark.parametrize("backend", POSTGRESQL, indirect=True)
async def test_a_sweeper_woken_after_another_rolled_forward_leaves_the_document_alone(
    ledger: Ledger, holds: Holds
) -> None:
    """A creation whose writer died after C3 (its blob tagged committed): sweeper 1 claims
    it and is held before resolving it, past its own lease; sweeper 2 claims it and rolls it
    forward. Sweeper 1 wakes: its roll-forward must lose and do nothing, never hand the
    ready document's blob row to the deletion path. (PostgreSQL: on SQLite one sweeper runs
    at a time.)"""
    blob = await seed_intent(ledger, tag=BlobState.COMMITTED, data=b"rolled once")
    holds.at("sweep.before_resolve")
    first = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.before_resolve")
    ledger.clock_offset = SWEEP_LEASE + 1
    assert (await Sweeper(ledger).run_once()).rolled_forward == 1
    holds.go("sweep.before_resolve")
    report = await outcome(first)
    assert not isinstance(report, BaseException), report
    assert await rows(ledger) == {blob: BlobState.COMMITTED}
    [doc] = [d async for d in ledger.list()]
    assert await read(ledger, doc.id) == b"rolled once"
    await settled_ok(ledger)


async def test_a_failed_writers_clean_up_removes_only_its_own_row(
    ledger: Ledger,
) -> None:
    """A deleted document's blob row waits in ``deleting`` for the deletion path (its blob
    still tagged committed). Another writer then fails and cleans up after itself: it
    removes its own abandoned row and no other, so the deletion path still finds the
    deleted document's row and deletes its bytes (a row removed with it would leave
    committed bytes no one ever deletes)."""
    doc = await ledger.create("deleted-first.txt", b"deleted, bytes still there")
    await ledger.delete(doc.id)
    failpoints.configure("create.after_upload=raise")
    try:
        with pytest.raises(failpoints.FailpointError):
            await ledger.create("fails.txt", b"a writer that fails")
    finally:
        failpoints.configure("")
    assert await rows(ledger) == {doc.blob: BlobState.DELETING}
    await sweep_past_everything(ledger)
    assert await stored(ledger) == {} and await rows(ledger) == {}


async def test_a_committed_creation_without_its_pending_document_goes_to_deletion(
    ledger: Ledger,
) -> None:
    """A creation's blob tagged committed whose pending document is gone (a row removed by
    hand): the sweeper's roll-forward finds no document to make ready and hands the blob to
    the deletion path instead, which deletes it; the sweep never fails on it."""
    blob = await seed_intent(ledger, tag=BlobState.COMMITTED)
    async with ledger.db.session() as session:
        await session.execute(delete(DocumentRow).where(DocumentRow.blob_name == blob))
    ledger.clock_offset = ledger.settings.sweep_after + 1
    report = await Sweeper(ledger).run_once()
    assert (report.moved_to_deleting, report.errors) == (1, 0), report
    await sweep_past_everything(ledger)
    assert await stored(ledger) == {} and await rows(ledger) == {}
    await settled_ok(ledger)


async def test_a_delete_that_loses_to_a_replace_says_so(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A delete read version 1; a replace commits version 2 before the delete's own step.
    The delete must fail (PreconditionFailed) and leave version 2, never answer success
    for a document that is still there."""
    doc = await ledger.create("raced-delete.txt", b"v1")
    real = ledger.transitions.delete_document

    async def replaced_first(doc_id: str, version: int) -> bool:
        await ledger.replace(doc_id, b"v2", expected_version=version)
        return await real(doc_id, version)

    monkeypatch.setattr(ledger.transitions, "delete_document", replaced_first)
    with pytest.raises(PreconditionFailed):
        await ledger.delete(doc.id)
    monkeypatch.undo()
    assert (await ledger.get(doc.id)).version == 2
    assert await read(ledger, doc.id) == b"v2"


async def test_a_failed_writers_clean_up_keeps_another_requests_key(
    ledger: Ledger, holds: Holds
) -> None:
    """Two creations under idempotency keys are in flight; one fails and cleans up after
    itself: it drops its own pending key and no other. The other finishes, and a retry of it
    under its key answers that first document (with the key dropped, the retry would make
    the document again and fail on its name)."""
    holds.at("create.after_upload")
    other = started(lambda: ledger.create("kept.txt", b"kept", idempotency_key="k-kept"))
    await holds.wait("create.after_upload")
    failpoints.configure("create.after_upload=raise")
    try:
        with pytest.raises(failpoints.FailpointError):
            await ledger.create("fails.txt", b"fails", idempotency_key="k-fails")
    finally:
        failpoints.configure("")
    holds.go("create.after_upload")
    doc = await outcome(other)
    assert isinstance(doc, Document), doc
    assert await ledger.create("kept.txt", b"kept", idempotency_key="k-kept") == doc
    assert [d.id async for d in ledger.list()] == [doc.id]


async def test_a_stale_attempts_confirm_loses_to_the_retry_that_took_its_intent(
    ledger: Ledger, holds: Holds
) -> None:
    """Attempt A is held after its upload past its lease and the margin; retry B (same key)
    takes the intent over and is held at the same step. A wakes: its confirm must lose, so
    A is told IntentLost and does nothing further (no C3: the blob B has not confirmed stays
    tagged pending); B then finishes with its document."""
    data = b"the bytes both attempts send"
    holds.at("create.after_upload")
    first = started(lambda: ledger.create("confirmed.txt", data, idempotency_key="k-conf"))
    await holds.wait("create.after_upload")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    holds.at("create.after_upload")
    retry = started(lambda: ledger.create("confirmed.txt", data, idempotency_key="k-conf"))
    await holds.wait("create.after_upload", 2)
    holds.go("create.after_upload", 0)
    stale = await outcome(first)
    assert isinstance(stale, IntentLost), stale
    assert set((await stored(ledger)).values()) == {"pending"}
    holds.go("create.after_upload", 1)
    doc = await outcome(retry)
    assert isinstance(doc, Document), doc
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}
    await settled_ok(ledger)


async def test_a_retry_resumes_an_older_releases_intent_and_no_other(ledger: Ledger) -> None:
    """Two intents an older release left behind (no owner token: ``attempt`` NULL), each
    under its key, both dead past the margin. A retry under one key takes over that intent
    alone (by its name: the NULL token it saw is every such row's) and gets its document;
    the other intent stays as it was, still ownerless and pending."""
    taken = await seed_intent(ledger, tag=None, key="k-old", doc_name="old.txt")
    other = await seed_intent(ledger, tag=None, key="k-other", doc_name="other.txt")
    async with ledger.db.session() as session:
        await session.execute(update(BlobRow).values(attempt=None))
    ledger.clock_offset = Transitions(ledger.db, ledger.settings).takeover_margin + 1
    doc = await ledger.create("old.txt", b"resumed", content_type="text/plain",
                            idempotency_key="k-old")
    assert doc.blob == taken and await read(ledger, doc.id) == b"resumed"
    async with ledger.db.session() as session:
        left = (await session.execute(select(BlobRow.state, BlobRow.attempt)
                                      .where(BlobRow.name == other))).one()
    assert tuple(left) == (BlobState.PENDING, None)


async def test_a_writer_whose_intent_was_claimed_after_c3_commits_its_own_row_only(
    ledger: Ledger, holds: Holds
) -> None:
    """A writer is held after C3 past its lease; a sweeper claims its intent together with
    another stale intent (one token for both) and is held before deciding. The writer wakes:
    its C4 makes the roll-forward the sweeper would make on its own row, and no other (the
    other intent is not the writer's to commit), so it gets its document; the sweeper then
    sweeps the other intent alone."""
    data = b"committed by the writer after the claim"
    holds.at("create.after_tag")
    writer = started(lambda: ledger.create("claimed-after-c3.txt", data))
    await holds.wait("create.after_tag")
    other = await seed_intent(ledger, tag=BlobState.PENDING)
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    holds.at("sweep.after_claim")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_claim")
    holds.go("create.after_tag")
    result = await outcome(writer)
    assert isinstance(result, Document), result
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert (report.swept, report.errors) == (1, 0), report
    assert other not in await stored(ledger)
    assert await read(ledger, result.id) == data
    assert await rows(ledger) == {result.blob: BlobState.COMMITTED}
    assert await stored(ledger) == {result.blob: "committed"}
    await settled_ok(ledger)


async def test_c4_records_its_response_under_its_own_key_only(
    ledger: Ledger, holds: Holds
) -> None:
    """Two creations under idempotency keys are in flight; the one that reaches C4 first
    records its response under its own key and no other: a retry of each under its key
    answers its own document."""
    holds.at("create.after_upload")
    later = started(lambda: ledger.create("later.txt", b"later", idempotency_key="k-later"))
    await holds.wait("create.after_upload")
    first = await ledger.create("first.txt", b"first", idempotency_key="k-first")
    holds.go("create.after_upload")
    second = await outcome(later)
    assert isinstance(second, Document), second
    assert await ledger.create("later.txt", b"later", idempotency_key="k-later") == second
    assert await ledger.create("first.txt", b"first", idempotency_key="k-first") == first


async def _waiting_on_a_row_lock(ledger: Ledger) -> None:
    """Until a statement of the database waits on a lock another transaction holds."""
    async with asyncio.timeout(STEP):
        while True:
            async with ledger.db.engine.connect() as conn:
                waiting = (await conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"))).scalar_one()
            if waiting:
                return
            await asyncio.sleep(0.02)


@pytest.mark.parametrize("backend", ["postgresql-local"], indirect=True)
async def test_a_give_up_loses_to_a_verification_committed_under_it(ledger: Ledger) -> None:
    """A twin completion of a tus upload is recording the SHA-256 it verified (its
    transaction not committed yet) when a give-up of the same upload starts: the give-up's
    first step still sees the upload unverified, and its removal of the upload's row waits
    on the twin's lock. The twin commits: the removal, re-checked on the row as committed,
    must find it verified and undo the give-up, so the twin goes on to its document.
    (PostgreSQL: on SQLite the two transactions never interleave.)"""
    resumable = Resumable(ledger, segment=SEGMENT)
    data = b"bytes a twin completion verified"
    upload = await resumable.create(len(data), {"filename": "twin.bin"})
    assert await resumable.append(upload, 0, _body(data)) == len(data)
    upload = await resumable.find(upload.id)
    async with ledger.db.engine.connect() as twin:
        await twin.begin()
        await twin.execute(update(UploadRow).where(UploadRow.id == upload.id).values(
            sha256=hashlib.sha256(data).hexdigest()))
        give_up = started(lambda: ledger.give_up(upload.intent("text/plain"), upload.id))
        await _waiting_on_a_row_lock(ledger)
        await twin.commit()
    assert await outcome(give_up) is False
    doc = await resumable.complete(await resumable.find(upload.id))
    assert isinstance(doc, Document), doc
    assert await read(ledger, doc.id) == data
    await settled_ok(ledger)


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_a_give_up_woken_after_the_sweeper_claimed_the_upload_loses(
    ledger: Ledger, holds: Holds
) -> None:
    """A tus upload whose declared SHA-256 lies is completing: it published its parts and
    is held there, past the upload's expiry; the sweeper claims the intent and is held
    before deciding. The completion wakes, finds the mismatch and gives the upload up: the
    give-up must lose (the intent is the sweeper's now), so the sweeper's claim stands and
    the sweeper sweeps the intent itself."""
    upload, refused, sweeper = await _completed_past_a_sweepers_claim(
        ledger, holds, b"bytes that do not match the declared digest",
        {"filename": "liar.bin", "sha256": "0" * 64})
    assert isinstance(refused, IntegrityError), refused
    assert await rows(ledger) == {upload.blob_name: BlobState.PENDING}
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert (report.swept, report.errors) == (1, 0), report
    assert await rows(ledger) == {} and await stored(ledger) == {}


@pytest.mark.parametrize("backend", ["postgresql-s3"], indirect=True)
async def test_a_writer_woken_after_the_sweeper_fenced_its_intent_gets_no_document(
    ledger: Ledger, holds: Holds, paused_s3_deletes: str
) -> None:
    """The writer is held after its confirm, past its lease; the sweeper claims the intent,
    reads its tag (pending), fences the row (``pending -> deleting``, its claim kept) and
    is held inside its delete, after reading the tag again. The writer wakes: its C3 retag
    goes through (S3 cannot condition it), but its C4 must lose, the row being ``deleting``
    even though still claimed: the sweeper's delete then removes the bytes, and a document
    made ready by that C4 would point at nothing."""
    holds.at("create.after_confirm")
    writer = started(lambda: ledger.create("fenced.txt", b"bytes the sweeper deletes"))
    await holds.wait("create.after_confirm")
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    holds.at("sweep.after_fence")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_fence")
    holds.at(paused_s3_deletes)
    holds.go("sweep.after_fence")
    await holds.wait(paused_s3_deletes)
    holds.go("create.after_confirm")
    result = await outcome(writer)
    holds.go(paused_s3_deletes)
    report = await outcome(sweeper)
    assert isinstance(result, IntentLost), result
    assert not isinstance(report, BaseException), report
    assert [d async for d in ledger.list()] == []
    await sweep_past_everything(ledger)
    assert await stored(ledger) == {} and await rows(ledger) == {}
    await settled_ok(ledger)


@pytest.mark.parametrize("backend", ["postgresql-s3"], indirect=True)
async def test_a_sweeper_woken_after_another_claimed_its_intent_fences_nothing(
    ledger: Ledger, holds: Holds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On S3 (the decision made in the database before any delete): the writer is held
    after its confirm, past its lease; sweeper 1 claims the intent, reads its tag
    (``pending``) and is held before it fences the row, past its own lease. The writer does
    C3 (``committed``) and is held before C4; sweeper 2 claims the intent, reads
    ``committed`` and is held before it rolls the creation forward. Sweeper 1 wakes: its
    fence must lose (the claim is not its own any more), so sweeper 2 rolls the document
    forward and the writer, woken last, gets that document with its bytes."""
    real = ledger.transitions.fence_swept

    async def held_fence(token: str, names: Sequence[str], **options: Any) -> list[str]:
        await holds.hit("test.before_fence")
        return await real(token, names, **options)

    monkeypatch.setattr(ledger.transitions, "fence_swept", held_fence)
    data = b"bytes two sweepers decide on"
    holds.at("create.after_confirm")
    writer = started(lambda: ledger.create("two-sweepers.txt", data))
    await holds.wait("create.after_confirm")
    settings = ledger.settings
    ledger.clock_offset = settings.upload_deadline + settings.sweep_after + 1
    holds.at("test.before_fence")
    first = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("test.before_fence")
    holds.at("create.after_tag")
    holds.go("create.after_confirm")
    await holds.wait("create.after_tag")
    ledger.clock_offset += SWEEP_LEASE + 1
    holds.at("sweep.before_resolve")
    second = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.before_resolve")
    holds.go("test.before_fence")
    report = await outcome(first)
    assert not isinstance(report, BaseException), report
    assert (report.swept, report.moved_to_deleting) == (0, 0), report
    holds.go("sweep.before_resolve")
    rolled = await outcome(second)
    assert not isinstance(rolled, BaseException), rolled
    assert rolled.rolled_forward == 1, rolled
    holds.go("create.after_tag")
    doc = await outcome(writer)
    assert isinstance(doc, Document), doc
    assert await read(ledger, doc.id) == data
    assert await rows(ledger) == {doc.blob: BlobState.COMMITTED}
    assert await stored(ledger) == {doc.blob: "committed"}


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_a_part_stored_across_the_uploads_expiry_is_not_recorded(
    ledger: Ledger, holds: Holds
) -> None:
    """A PATCH stores a part of a tus upload and is held before recording it; the upload
    expires meanwhile. The request must not record the part (the durable offset advances
    only while the upload is unexpired), so it is not acknowledged and the offset stays
    where it was."""
    resumable = Resumable(ledger, segment=SEGMENT)
    upload = await resumable.create(2 * SEGMENT, {"filename": "expiring.bin"})
    holds.at("tus.after_part")
    request = started(lambda: resumable.append(upload, 0, _body(b"E" * SEGMENT)))
    await holds.wait("tus.after_part")
    ledger.clock_offset = ledger.settings.resumable_expiry + 1
    holds.go("tus.after_part")
    refused = await outcome(request)
    assert isinstance(refused, OffsetMismatch), refused
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.expired and (found.offset, found.parts) == (0, [])


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_a_completion_that_lost_to_a_claim_leaves_its_upload_open(
    ledger: Ledger, holds: Holds
) -> None:
    """A tus upload's completion published its parts and is held there, past the upload's
    expiry; the sweeper claims the intent and is held before deciding. The completion wakes
    and loses its confirm (IntentLost); it must not close the upload on its way out (there
    is no ready document beside it), or a HEAD would show the upload complete while the
    sweeper deletes its bytes."""
    upload, lost, sweeper = await _completed_past_a_sweepers_claim(
        ledger, holds, b"bytes of an upload claimed before its confirm",
        {"filename": "claimed.bin"})
    assert isinstance(lost, IntentLost), lost
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open"
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert await rows(ledger) == {} and await stored(ledger) == {}


@pytest.mark.parametrize("backend", SMALL_PARTS, indirect=True)
async def test_a_completion_whose_blob_a_claiming_sweeper_deleted_is_told_it_lost(
    ledger: Ledger, holds: Holds
) -> None:
    """A tus upload's completion confirmed its intent and is held before C3, past its lease;
    a sweeper claims the intent, deletes the blob (still tagged ``pending``) and is held
    before removing the rows. The completion wakes: its C3 finds no blob, and since the
    intent is the sweeper's now it must say so (IntentLost: the upload was swept), not
    pass the store's error on as if its own step had failed."""
    resumable = Resumable(ledger, segment=SEGMENT)
    data = b"bytes a sweeper deletes between the confirm and C3"
    upload = await resumable.create(len(data), {"filename": "late-c3.bin"})
    assert await resumable.append(upload, 0, _body(data)) == len(data)
    upload = await resumable.find(upload.id)
    holds.at("tus.after_confirm")
    completion = started(lambda: resumable.complete(upload))
    await holds.wait("tus.after_confirm")
    settings = ledger.settings
    ledger.clock_offset = settings.upload_deadline + settings.sweep_after + 1
    holds.at("sweep.after_delete")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_delete")
    assert await stored(ledger) == {}
    holds.go("tus.after_confirm")
    lost = await outcome(completion)
    assert isinstance(lost, IntentLost), lost
    holds.go("sweep.after_delete")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert (report.swept, report.errors) == (1, 0), report
    assert await rows(ledger) == {} and await stored(ledger) == {}


async def test_a_failed_creation_takes_only_its_own_upload_row(ledger: Ledger) -> None:
    """A creation's body breaks off while a resumable upload is open: the failure path
    drops the creation's rows and no other upload's, so the upload in flight goes on."""
    upload = await Resumable(ledger).create(5, {"name": "in-flight.txt"})

    async def broken() -> AsyncIterator[bytes]:
        yield b"the start of a body"
        raise ConnectionResetError("the client went away")

    with pytest.raises(ConnectionResetError):
        await ledger.create("failed.txt", broken())
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "open" and found.blob_name == upload.blob_name
