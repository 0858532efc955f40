"""Paused writers and stale attempts: every transition is a compare-and-set, so a writer that
wakes after a sweeper or a retry took its intent over loses every later step and changes
nothing; create and replace return what they wrote; idempotent retries get the first
response. Each writer is held at a protocol step (a failpoint of the ledger) while the others
run, on all four backend combinations."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from sqlalchemy import select

from blobledger import failpoints
from blobledger.config import minimum_sweep_after
from blobledger.errors import (
    ConditionNotMet,
    IdempotencyConflict,
    IdempotencyInProgress,
    IntentLost,
    NotFound,
    PreconditionFailed,
)
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow, IdempotencyKeyRow
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.support.holds import STEP, Holds, stalling

T = TypeVar("T")


async def read(ledger: Ledger, doc_id: str) -> bytes:
    return b"".join([chunk async for chunk in ledger.read(doc_id)])


async def stored(ledger: Ledger) -> dict[str, str]:
    return {info.name: (info.tags or {}).get("state", "") async for info in ledger.store.list()}


async def rows(ledger: Ledger) -> dict[str, str]:
    async with ledger.db.session() as session:
        return dict((await session.execute(select(BlobRow.name, BlobRow.state))).all())


async def sweep_past_everything(ledger: Ledger, passes: int = 3) -> None:
    """Sweeper and deletion path with the clock past every cutoff, a grace apart per pass."""
    ledger.clock_offset = ledger.settings.sweep_after + 1
    for _ in range(passes):
        await Sweeper(ledger).run_once()
        ledger.clock_offset += ledger.settings.delete_grace + 1


async def outcome(task: Awaitable[T]) -> T | BaseException:
    try:
        return await asyncio.wait_for(task, STEP)
    except Exception as exc:
        return exc


def started(coro: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
    async def run() -> T:
        return await coro()

    return asyncio.create_task(run())


async def stalled_create(ledger: Ledger, name: str) -> tuple[asyncio.Task[Document],
                                                             asyncio.Event]:
    """A create of ``name`` whose body stalls after its first half (returned once that half
    was sent): its task, and the gate that lets the second half go."""
    body, sent, gate = stalling(b"first half, ", b"second half")
    writer = started(lambda: ledger.create(name, body))
    await asyncio.wait_for(sent.wait(), STEP)
    return writer, gate


async def test_stalled_replace_never_points_at_deleted_bytes(
    ledger: Ledger, holds: Holds
) -> None:
    """A replace held after R3 while the sweeper hands its blob to the deletion path and
    deletes it: R4 loses, the document keeps its old bytes, nothing is deleted twice."""
    doc = await ledger.create("stalled.txt", b"old bytes")
    holds.at("replace.after_tag")
    writer = started(lambda: ledger.replace(doc.id, b"new bytes", expected_version=1))
    await holds.wait("replace.after_tag")
    await sweep_past_everything(ledger)
    holds.go("replace.after_tag")
    result = await outcome(writer)
    assert isinstance(result, IntentLost), result
    current = await ledger.get(doc.id)
    assert (current.version, current.blob) == (1, doc.blob)
    assert await read(ledger, doc.id) == b"old bytes"
    await sweep_past_everything(ledger)
    assert await read(ledger, doc.id) == b"old bytes"
    assert await stored(ledger) == {doc.blob: "committed"}
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


async def test_stale_attempt_cannot_undo_the_retry_that_took_over(
    ledger: Ledger, holds: Holds
) -> None:
    """Attempt A stalls after its upload past its lease; retry B takes the intent over and
    is held too; A wakes and fails without touching B's rows or blob; B finishes."""
    data = b"the same bytes, sent twice"
    holds.at("create.after_upload")
    first = started(lambda: ledger.create("twice.txt", data, idempotency_key="k-stale"))
    await holds.wait("create.after_upload")
    ledger.clock_offset = ledger.settings.sweep_after + 1  # A's lease and the margin passed
    holds.at("create.after_upload")  # hold the retry at the same step
    retry = started(lambda: ledger.create("twice.txt", data, idempotency_key="k-stale"))
    await holds.wait("create.after_upload", 2)
    # A wakes first, finds its intent taken over, and leaves it alone; then B goes on.
    holds.go("create.after_upload", 0)
    stale = await outcome(first)
    holds.go("create.after_upload", 1)
    assert isinstance(stale, IntentLost), stale
    doc = await outcome(retry)
    assert not isinstance(doc, BaseException), doc
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await rows(ledger) == {doc.blob: "committed"}
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


async def test_replace_returns_what_it_wrote(ledger: Ledger, holds: Holds) -> None:
    """Writer 1 is held right after R4 while writer 2 replaces again: writer 1 is still told
    its own version and checksum, so its next If-Match cannot overwrite unseen bytes."""
    doc = await ledger.create("ours.txt", b"v1")
    holds.at("replace.after_commit")
    one = started(lambda: ledger.replace(doc.id, b"writer one", expected_version=1))
    await holds.wait("replace.after_commit")
    two = await ledger.replace(doc.id, b"writer two", expected_version=2)
    holds.go("replace.after_commit")
    mine = await outcome(one)
    assert not isinstance(mine, BaseException), mine
    assert mine.version == 2
    assert mine.sha256 == hashlib.sha256(b"writer one").hexdigest()
    assert two.version == 3
    with pytest.raises(PreconditionFailed):
        await ledger.replace(doc.id, b"lost update", expected_version=mine.version)


async def test_idempotent_retry_gets_the_first_response(ledger: Ledger) -> None:
    """After a replace, after a delete, and after the deletion path removed the blob row,
    a retry of the original create gets the first response, never a second document."""
    data = b"created once"
    first = await ledger.create("once.txt", data, idempotency_key="k-once")
    await ledger.replace(first.id, b"replaced", expected_version=1)
    assert await ledger.create("once.txt", data, idempotency_key="k-once") == first
    await ledger.delete(first.id, expected_version=2)
    assert await ledger.create("once.txt", data, idempotency_key="k-once") == first
    await sweep_past_everything(ledger)
    assert await rows(ledger) == {}
    assert await ledger.create("once.txt", data, idempotency_key="k-once") == first
    assert [d async for d in ledger.list()] == []
    with pytest.raises(IdempotencyConflict):
        await ledger.create("once.txt", b"other bytes", idempotency_key="k-once")
    with pytest.raises(IdempotencyConflict):
        await ledger.create("once.txt", data, idempotency_key="k-once",
                            content_type="text/html")


async def test_idempotency_keys_expire_after_the_retention(ledger: Ledger) -> None:
    first = await ledger.create("kept.txt", b"kept", idempotency_key="k-kept")
    await ledger.delete(first.id)
    ledger.clock_offset = ledger.settings.idempotency_retention + 1
    report = await Sweeper(ledger).run_once()
    assert report.keys_expired == 1
    async with ledger.db.session() as session:
        assert (await session.execute(select(IdempotencyKeyRow))).first() is None
    again = await ledger.create("kept.txt", b"kept", idempotency_key="k-kept")
    assert again.id != first.id and again.version == 1


async def test_writer_paused_in_its_upload_never_commits_a_swept_intent(
    ledger: Ledger,
) -> None:
    """The writer stalls mid-upload; the sweeper (its clock ahead) removes the intent; the
    writer's upload then completes, the confirm step loses, its own blob is deleted under
    the pending tag and the writer says the upload was abandoned: no committed orphan."""
    writer, gate = await stalled_create(ledger, "paused.txt")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    report = await Sweeper(ledger).run_once()
    assert report.swept == 1
    gate.set()
    result = await outcome(writer)
    assert isinstance(result, IntentLost), result
    assert await stored(ledger) == {}
    assert await rows(ledger) == {}
    report_ = await check(ledger, settled=True)
    assert report_.ok, report_.render()


async def test_a_creation_rolled_forward_meanwhile_is_returned(
    ledger: Ledger, holds: Holds
) -> None:
    """Held between C3 and C4 while the sweeper rolls the creation forward: the writer gets
    the document the sweeper made ready, with its own bytes."""
    holds.at("create.after_tag")
    writer = started(lambda: ledger.create("rolled.txt", b"rolled bytes"))
    await holds.wait("create.after_tag")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    assert (await Sweeper(ledger).run_once()).rolled_forward == 1
    holds.go("create.after_tag")
    doc = await outcome(writer)
    assert not isinstance(doc, BaseException), doc
    assert doc.sha256 == hashlib.sha256(b"rolled bytes").hexdigest()
    assert await read(ledger, doc.id) == b"rolled bytes"


async def test_a_creation_rolled_forward_meanwhile_is_returned_beside_other_documents(
    ledger: Ledger, holds: Holds
) -> None:
    """As above with another document ready beside it: the writer gets its own document,
    the one the sweeper made ready, not the other."""
    other = await ledger.create("other.txt", b"other bytes")
    holds.at("create.after_tag")
    writer = started(lambda: ledger.create("rolled.txt", b"rolled bytes"))
    await holds.wait("create.after_tag")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    assert (await Sweeper(ledger).run_once()).rolled_forward == 1
    holds.go("create.after_tag")
    doc = await outcome(writer)
    assert not isinstance(doc, BaseException), doc
    assert doc.name == "rolled.txt" and doc.id != other.id
    assert await read(ledger, doc.id) == b"rolled bytes"


async def test_a_replace_whose_document_was_deleted_meanwhile_finds_it_gone(
    ledger: Ledger, holds: Holds
) -> None:
    """A replace held before R4 while its document is deleted, beside another document:
    R4 loses and the replace answers that its document is gone (not another's version)."""
    await ledger.create("other.txt", b"other bytes")
    doc = await ledger.create("deleted.txt", b"v1")
    holds.at("replace.after_tag")
    writer = started(lambda: ledger.replace(doc.id, b"v2", expected_version=1))
    await holds.wait("replace.after_tag")
    await ledger.delete(doc.id, expected_version=1)
    holds.go("replace.after_tag")
    refused = await outcome(writer)
    assert isinstance(refused, NotFound) and not isinstance(refused, PreconditionFailed), \
        refused


async def test_held_after_confirm_the_sweeper_still_wins_cleanly(
    ledger: Ledger, holds: Holds
) -> None:
    """Held after confirming its intent, past the extended lease: the sweeper deletes the
    pending blob; the writer's retag finds nothing and it fails as abandoned."""
    holds.at("create.after_confirm")
    writer = started(lambda: ledger.create("late.txt", b"late bytes"))
    await holds.wait("create.after_confirm")
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    assert (await Sweeper(ledger).run_once()).swept == 1
    holds.go("create.after_confirm")
    result = await outcome(writer)
    assert isinstance(result, IntentLost), result
    assert await stored(ledger) == {} and await rows(ledger) == {}


async def test_a_retry_waits_out_the_margin_past_a_dead_lease(ledger: Ledger) -> None:
    """A dead attempt's intent (what a kill after C2 leaves): the retry is told 'in progress'
    until the lease plus the sweeper's margin has passed, then resumes it."""
    data = b"uploaded before the crash"
    failpoints.configure("create.after_upload=raise")
    original = ledger.abandon

    async def no_compensation(intent: object) -> bool | None:
        return None

    ledger.abandon = no_compensation  # type: ignore[method-assign]
    try:
        with contextlib.suppress(failpoints.FailpointError):
            await ledger.create("dead.txt", data, idempotency_key="k-dead")
    finally:
        failpoints.configure("")
        ledger.abandon = original  # type: ignore[method-assign]
    ledger.clock_offset = ledger.settings.upload_deadline + 1  # lease over, margin not
    with pytest.raises(IdempotencyInProgress):
        await ledger.create("dead.txt", data, idempotency_key="k-dead")
    ledger.clock_offset = minimum_sweep_after(ledger.settings.upload_deadline) + 1
    doc = await ledger.create("dead.txt", data, idempotency_key="k-dead")
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}


async def test_a_refused_c3_while_the_intent_is_still_the_writers_fails_the_write(
    ledger: Ledger, holds: Holds
) -> None:
    """C3 is conditioned on ``pending`` and its refusal is never taken for done. Schedule:
    the writer is held after its confirm, still owning its intent; its blob's state is
    rewritten behind the ledger's back (an operator's tool); the writer wakes: C3 is refused
    and the tag read back is not ``committed``, so the create fails with the store's
    refusal (the intent is still its own) and no document is made ready over a blob not
    tagged ``committed`` (neither by a C3 written over the other tag, nor by a C4 after a
    refusal taken for done)."""
    holds.at("create.after_confirm")
    writer = started(lambda: ledger.create("retagged-elsewhere.txt", b"bytes"))
    await holds.wait("create.after_confirm")
    (name,) = await rows(ledger)
    await ledger.store.set_tags(name, {"state": "elsewhere"})
    holds.go("create.after_confirm")
    result = await outcome(writer)
    assert isinstance(result, ConditionNotMet), result
    assert [doc async for doc in ledger.list()] == []
    assert (await ledger.store.get_tags(name)).get("state") == "elsewhere"
