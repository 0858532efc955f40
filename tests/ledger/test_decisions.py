"""Destruction follows an irreversible decision, and tags never go backwards.

A writer or a sweeper paused *inside* a step (between the reads and the writes one store call
makes, or between a sweeper's claim and its decision) wakes into a state others moved past.
Each test holds one actor at such a point on every backend where the point exists, lets the
others run with the clock ahead, then wakes it: no acknowledged document loses its bytes, no
ready blob is tagged ``pending``, and every answer agrees with what the database decided.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import pytest

from blobledger import failpoints
from blobledger.config import minimum_sweep_after
from blobledger.errors import IdempotencyInProgress, IntentLost
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import SWEEP_LEASE, Sweeper
from tests.ledger.test_fencing import outcome, read, rows, started, stored
from tests.support.holds import Holds

#: staged on Azure and multipart on S3 (the fixture's single-put limit is 256 KiB)
BIG = 300 * 1024
S3_BACKENDS = ["sqlite-s3", "postgresql-s3"]


async def dead_attempt(ledger: Ledger, name: str, data: bytes, key: str) -> None:
    """What a kill after C2 leaves: a pending intent under ``key`` and its blob, tagged
    pending, no compensation."""
    original = ledger.abandon

    async def no_compensation(intent: object) -> bool | None:
        return None

    failpoints.configure("create.after_upload=raise")
    ledger.abandon = no_compensation  # type: ignore[method-assign]
    try:
        with contextlib.suppress(failpoints.FailpointError):
            await ledger.create(name, data, idempotency_key=key)
    finally:
        failpoints.configure("")
        ledger.abandon = original  # type: ignore[method-assign]


async def assert_clean(ledger: Ledger) -> None:
    report = await check(ledger)
    assert report.ok, report.render()


async def test_a_writer_paused_after_its_upload_never_retags_a_committed_blob(
    ledger: Ledger, holds: Holds
) -> None:
    """Paused right after its create-only publication (on S3: after CompleteMultipartUpload,
    where a tag write used to follow) while a retry under its key takes the intent over and
    commits: the woken writer writes no tags, loses its confirm, and the retry's ready blob
    stays tagged ``committed``."""
    data = os.urandom(BIG)
    holds.at("put.after_commit")
    first = started(lambda: ledger.create("paused.bin", data, idempotency_key="k-paused"))
    await holds.wait("put.after_commit")
    ledger.clock_offset = minimum_sweep_after(ledger.settings.upload_deadline) + 1
    doc = await ledger.create("paused.bin", data, idempotency_key="k-paused")
    assert await stored(ledger) == {doc.blob: "committed"}
    holds.go("put.after_commit")
    result = await outcome(first)
    assert isinstance(result, IntentLost) or result == doc, result
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await read(ledger, doc.id) == data
    await assert_clean(ledger)


@pytest.mark.parametrize("backend", S3_BACKENDS)
async def test_a_sweeper_paused_inside_its_delete_never_deletes_a_rolled_forward_blob(
    ledger: Ledger, holds: Holds
) -> None:
    """S3's delete compares the tags, then deletes conditioned on the ETag, which a retag
    does not change. A sweeper held between the two, past its claim's lease and the margin,
    while a retry under the dead attempt's key runs: the sweeper fenced the row before its
    delete, so the retry cannot resume that intent; it makes a new document, and the
    sweeper's delete destroys nothing that anyone was told exists."""
    data = b"bytes of a dead attempt"
    await dead_attempt(ledger, "dead.txt", data, "k-dead")
    holds.at("delete.after_check")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("delete.after_check")
    ledger.clock_offset += SWEEP_LEASE + minimum_sweep_after(ledger.settings.upload_deadline)
    doc = await ledger.create("dead.txt", data, idempotency_key="k-dead")
    holds.go("delete.after_check")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert await read(ledger, doc.id) == data
    assert (await stored(ledger)).get(doc.blob) == "committed"
    await assert_clean(ledger)


async def test_a_retry_never_takes_over_an_intent_a_sweeper_claimed(
    ledger: Ledger, holds: Holds
) -> None:
    """A sweeper held right after claiming a dead attempt's intent, past its lease and the
    margin: a retry under the key is told the attempt is in progress, never handed the
    sweeper's intent; once the sweeper has removed it, the retry creates the document."""
    data = b"claimed by the sweeper"
    await dead_attempt(ledger, "claimed.txt", data, "k-claimed")
    holds.at("sweep.after_claim")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_claim")
    ledger.clock_offset += SWEEP_LEASE + minimum_sweep_after(ledger.settings.upload_deadline)
    with pytest.raises(IdempotencyInProgress):
        await ledger.create("claimed.txt", data, idempotency_key="k-claimed")
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert report.swept == 1, report
    doc = await ledger.create("claimed.txt", data, idempotency_key="k-claimed")
    assert await read(ledger, doc.id) == data
    await assert_clean(ledger)


async def test_a_creation_paused_after_c3_wins_against_an_undecided_sweeper(
    ledger: Ledger, holds: Holds
) -> None:
    """Held between C3 and C4 while a sweeper claims the intent and is held before it
    decides: the writer's C4 makes the roll-forward the sweeper would make, and the writer
    gets its document (never IntentLost for a document that then becomes ready); the
    sweeper, woken, finds nothing left to decide."""
    holds.at("create.after_tag")
    writer = started(lambda: ledger.create("undecided.txt", b"committed bytes"))
    await holds.wait("create.after_tag")
    holds.at("sweep.after_claim")
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.upload_deadline + 1
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_claim")
    holds.go("create.after_tag")
    doc = await outcome(writer)
    assert not isinstance(doc, BaseException), doc
    assert doc.sha256 == hashlib.sha256(b"committed bytes").hexdigest()
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException), report
    assert report.errors == 0 and report.rolled_forward == 0 and report.swept == 0, report
    assert await read(ledger, doc.id) == b"committed bytes"
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await rows(ledger) == {doc.blob: "committed"}
    await assert_clean(ledger)


@pytest.mark.parametrize("meanwhile", ["committed", "swept"])
async def test_a_retry_whose_intent_goes_away_before_its_take_over_claims_nothing(
    ledger: Ledger, holds: Holds, meanwhile: str
) -> None:
    """A retry read its key's record (still pending) and is held before it takes the intent
    over; meanwhile the intent stops being a pending row: the first attempt finishes (C4:
    the row is committed) or, the first attempt dead, a sweeper removes it. The take-over
    then finds no pending row and must claim nothing: the retry is told the attempt is in
    progress, and the next retry gets the first attempt's document, or, after the sweep,
    makes its own."""
    data = f"a retry that finds its intent {meanwhile}".encode()
    key = f"k-{meanwhile}"
    first = None
    if meanwhile == "committed":
        holds.at("create.after_tag")
        first = started(lambda: ledger.create("vanished.txt", data, idempotency_key=key))
        await holds.wait("create.after_tag")
    else:
        await dead_attempt(ledger, "vanished.txt", data, key)
    holds.at("create.before_take_over")
    retry = started(lambda: ledger.create("vanished.txt", data, idempotency_key=key))
    await holds.wait("create.before_take_over")
    if first is not None:
        holds.go("create.after_tag")
        doc = await outcome(first)
        assert not isinstance(doc, BaseException), doc
    else:
        ledger.clock_offset = ledger.settings.sweep_after + 1
        report = await Sweeper(ledger).run_once()
        assert report.swept == 1, report
        assert await rows(ledger) == {}
    holds.go("create.before_take_over")
    answered = await outcome(retry)
    assert isinstance(answered, IdempotencyInProgress), answered
    if first is None:
        assert await rows(ledger) == {}  # nothing taken over, nothing left behind
        doc = await ledger.create("vanished.txt", data, idempotency_key=key)
    else:
        assert await ledger.create("vanished.txt", data, idempotency_key=key) == doc
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}
    await assert_clean(ledger)
