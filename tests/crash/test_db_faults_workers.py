"""Database faults in the workers' steps: the connection to PostgreSQL cut
(:mod:`tests.support.pgproxy`) at each statement of the event delivery worker's claim and
mark, of the processing worker's claim and verdicts (accept, the last accept, reject,
failed), of a variant maker's claim, confirm and attach, of the retag worker's claim and record, and
of R4 and the delete after
they detached a version's variants; at COMMIT both before it is sent (it never applied) and
after (it applied; the writer never hears).

No step of a worker or a variant maker is tried again on a lost connection: the run (or the
request) stops with the error, once the other items of its claim are done (a delivery claim's
events and a processing claim's rows run together), its rows stay where the transaction left
them (claimed under a lease at most), and the next run, with the clock past the lease,
finishes the work; R4 and the delete are tried once more on a fresh connection, or retried
by the client. A COMMIT is cut on the connection that ran the step's statements (the other
items' transactions run alongside). Each case then checks what that writer promises:

- delivery: every event delivered exactly once to a real receiver (Standard Webhooks
  signatures verified), its ``webhook-id`` the payload's id, its attempts between one and
  the number of logged sends, none left pending;
- processing: the document never readable before its last acceptance, decided once
  (``document.ready`` exactly once, or rejected through the deletion path), the settled
  invariants held;
- variants: one attached variant per (version, name) after a second request and the sweep,
  no variant blob without its row; R4 and the delete apply whole or not at all (the
  document, its variants detached and its event together).

PostgreSQL only (SQLite has no connection to cut). The suite runs :data:`SUITE`, a few
COMMITs (the cut whose outcome the writer cannot know); ``BLOBLEDGER_DB_FAULTS=all`` runs
every cut.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from blobledger.errors import BlobNotFound, NotFound
from blobledger.protocol import events
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import EventRow
from blobledger.variants import make_variant
from blobledger.workers.delivery import Delivery
from blobledger.workers.invariants import check
from blobledger.workers.processing import ProcessingWorker
from blobledger.workers.processors.base import ACCEPT, ProcessorFailed, Reader, Verdict
from blobledger.workers.retagger import RETAG_LEASE, Retagger
from tests.crash.child import Target
from tests.crash.conftest import make_target
from tests.crash.harness import PAST_CUTOFFS, RESOLVE_AT, read_all, settle
from tests.events.receiver import Receiver, receiving
from tests.held.conftest import PNG
from tests.support.pgproxy import PgProxy, When
from tests.variants.conftest import stored_variants, variant_rows
from tests.variants.images import VARIANTS, png

FULL = os.environ.get("BLOBLEDGER_DB_FAULTS") == "all"
COMMIT = r"^\s*COMMIT"
#: the workers' leases in these cases, and a clock past them (and past every backoff)
EVENT_LEASE, VARIANT_LEASE = 10.0, 20.0
LATER = 3600.0


@dataclass(frozen=True)
class Cut:
    """The ``nth`` statement matching ``pattern`` (counted once one matching ``after`` ran)
    of ``step`` of ``writer``, cut ``when``."""

    writer: str  # delivery | processing | variants | detach
    step: str
    statement: str
    pattern: str
    when: When = "before"
    nth: int = 1
    after: str | None = None

    @property
    def commit(self) -> bool:
        return self.statement == "COMMIT"

    @property
    def id(self) -> str:
        words = "_".join(self.statement.split()[:3]) + (f"_{self.nth}" if self.nth > 1 else "")
        return f"{self.writer}-{self.step.replace(' ', '_')}-{words}-{self.when}"


def step(writer: str, name: str, statements: list[tuple[str, str, int]],
         commit_after: str) -> list[Cut]:
    """Each statement cut before it is sent; the COMMIT (the first after a statement
    matching ``commit_after``) before and after."""
    return ([Cut(writer, name, label, pattern, "before", nth)
             for label, pattern, nth in statements]
            + [Cut(writer, name, "COMMIT", COMMIT, when, 1, commit_after)
               for when in ("before", "after")])


# the statements, as the proxy sees them (SQLAlchemy's text for asyncpg)
CLAIM_EVENTS = r"^SELECT events\.id\s+FROM events"
UPDATE_EVENT = r"^UPDATE events SET state="
FAIL_EVENT = r"^UPDATE events SET attempts="
CLAIM_WORK = r"^SELECT processing\.document_id"
LOCK_HELD = r"^SELECT documents\.id\s+FROM documents\b"
VERDICT = r"^UPDATE processing SET state="
UNDECIDED = r"^SELECT count\(\*\) AS count_1\s+FROM processing"
TO_READY = r"^UPDATE documents SET status="
READ_HELD = r"^SELECT documents\.id, documents\.name"
LOCK_VERSION = r"^SELECT documents\.id\s+FROM documents\b"
UPDATE_BLOBS = r"^UPDATE blobs SET state="
CLAIM_RETAGS = r"(?s)^UPDATE blobs SET attempt=(?!.*retag_due=)"
RECORD_RETAGS = r"(?s)^UPDATE blobs SET attempt=.*retag_due="

CUTS = [
    *step("delivery", "claim", [
        ("SELECT events (due)", CLAIM_EVENTS, 1),
        ("UPDATE events (claim)", r"^UPDATE events SET attempt=", 1)],
        r"^UPDATE events SET attempt="),
    *step("delivery", "delivered", [("UPDATE events", UPDATE_EVENT, 1)], UPDATE_EVENT),
    *step("delivery", "failed", [("UPDATE events", FAIL_EVENT, 1)], FAIL_EVENT),
    *step("delivery", "dead", [("UPDATE events", UPDATE_EVENT, 1)], UPDATE_EVENT),
    *step("processing", "claim", [
        ("SELECT processing", CLAIM_WORK, 1),
        ("UPDATE processing", r"^UPDATE processing SET attempt=", 1)],
        r"^UPDATE processing SET attempt="),
    *step("processing", "accept", [
        ("SELECT documents FOR UPDATE", LOCK_HELD, 1),
        ("UPDATE processing", VERDICT, 1),
        ("SELECT count(*)", UNDECIDED, 1)], UNDECIDED),
    *step("processing", "last accept", [
        ("SELECT documents FOR UPDATE", LOCK_HELD, 2),
        ("UPDATE processing", VERDICT, 2),
        ("SELECT count(*)", UNDECIDED, 2),
        ("UPDATE documents", TO_READY, 1),
        ("INSERT INTO events", r"^INSERT INTO events\b", 1),
        ("DELETE FROM processing", r"^DELETE FROM processing\b", 1),
        ("UPDATE idempotency_keys", r"^UPDATE idempotency_keys\b", 1)], TO_READY),
    *step("processing", "reject", [
        ("SELECT documents FOR UPDATE", LOCK_HELD, 1),
        ("UPDATE processing", VERDICT, 1),
        ("DELETE FROM documents", r"^DELETE FROM documents\b", 1),
        ("UPDATE blobs", UPDATE_BLOBS, 1),
        ("UPDATE blobs", UPDATE_BLOBS, 2),
        ("DELETE FROM processing", r"^DELETE FROM processing\b", 1),
        ("UPDATE idempotency_keys", r"^UPDATE idempotency_keys\b", 1)],
        r"^UPDATE idempotency_keys\b"),
    *step("processing", "failed", [
        ("UPDATE processing", r"(?s)^UPDATE processing SET attempt=.*\breason=", 1)],
        r"(?s)^UPDATE processing SET attempt=.*\breason="),
    *step("variants", "claim", [
        ("SELECT documents FOR UPDATE", LOCK_VERSION, 1),
        ("SELECT blobs (live)", r"^SELECT blobs\.name, blobs\.state", 1),
        ("INSERT INTO blobs", r"^INSERT INTO blobs\b", 1)], r"^INSERT INTO blobs\b"),
    *step("variants", "confirm", [("UPDATE blobs", r"^UPDATE blobs SET size=", 1)],
          r"^UPDATE blobs SET size="),
    *step("variants", "attach", [
        ("SELECT documents FOR UPDATE", LOCK_VERSION, 2),
        ("UPDATE blobs", UPDATE_BLOBS, 1)], UPDATE_BLOBS),
    # the retag worker (deferred retag): its claim of owed rows, and its record of the
    # retags done (the same UPDATE's SET, told apart by ``retag_due``)
    *step("retag", "claim", [
        ("SELECT blobs (owed)", r"^SELECT blobs\.name\s+FROM blobs", 1),
        ("UPDATE blobs (claim)", CLAIM_RETAGS, 1)], CLAIM_RETAGS),
    *step("retag", "record", [("UPDATE blobs (record)", RECORD_RETAGS, 1)], RECORD_RETAGS),
    # R4 and the delete after detach_variants: the detach itself, the event after it, COMMIT
    *step("detach", "R4", [
        ("UPDATE blobs (detach)", UPDATE_BLOBS, 3),
        ("INSERT INTO events", r"^INSERT INTO events\b", 1)], r"^INSERT INTO events\b"),
    *step("detach", "delete", [
        ("UPDATE blobs (detach)", UPDATE_BLOBS, 2),
        ("INSERT INTO events", r"^INSERT INTO events\b", 1)], r"^INSERT INTO events\b"),
]
#: the suite's share: the COMMITs whose outcome the writer cannot know, one or two per writer
SUITE = {
    "delivery-claim-COMMIT-after",
    "delivery-delivered-COMMIT-after",
    "delivery-failed-COMMIT-before",
    "processing-last_accept-COMMIT-after",
    "processing-last_accept-COMMIT-before",
    "processing-reject-COMMIT-after",
    "variants-claim-COMMIT-after",
    "variants-attach-COMMIT-after",
    "detach-R4-COMMIT-after",
    "detach-delete-COMMIT-before",
    "retag-claim-COMMIT-after",
    "retag-record-COMMIT-after",
}
MATRIX = [cut for cut in CUTS if FULL or cut.id in SUITE]
assert {cut.id for cut in CUTS} >= SUITE, "a suite case names no cut"


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


@pytest.mark.parametrize("cut", MATRIX, ids=[cut.id for cut in MATRIX])
async def test_worker_db_fault(cut: Cut, tmp_path: Path, request: pytest.FixtureRequest,
                               proxy: PgProxy) -> None:
    direct = await make_target("postgresql-local", tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    await CASES[cut.writer](cut, target, proxy)


async def cut_run(cut: Cut, proxy: PgProxy, run: Awaitable[Any]) -> Any:
    """``run`` with the proxy armed for ``cut``: its result, or the error it raised."""
    proxy.arm(cut.pattern, cut.when, nth=cut.nth, after=cut.after, same_connection=True)
    try:
        return await run
    except Exception as exc:  # the worker's error is the outcome under test
        return exc
    finally:
        assert proxy.fired, f"the cut at {cut.statement} never fired: {proxy.statements}"
        proxy.disarm()


def ledger_of(target: Target, offset: float = 0.0, **settings: Any) -> Ledger:
    ledger = target.ledger(clock_offset=offset)
    ledger.settings = ledger.settings.with_(**settings)
    return ledger


async def settled_and_checked(target: Target, offset: float = RESOLVE_AT) -> None:
    async with target.ledger(clock_offset=offset) as ledger:
        await settle(ledger)
        report = await check(ledger, settled=True)
        assert report.ok, report.render()


async def event_count(ledger: Ledger, kind: str, subject: str) -> int:
    async with ledger.db.transaction(readonly=True) as conn:
        return int((await conn.execute(select(func.count()).select_from(EventRow).where(
            EventRow.type == kind, EventRow.subject == subject))).scalar_one())


# -- delivery -------------------------------------------------------------------------------
async def delivery_case(cut: Cut, target: Target, proxy: PgProxy) -> None:
    """Two documents' ``document.ready``; one worker (both events in one claim, sent
    together) cut at its claim or at the first mark (the receiver refuses the first
    delivery where that mark is a failure; ``dead``: after one attempt). Then a worker with
    the clock past the lease and every backoff, a dead event replayed, delivers the rest:
    each event taken exactly once (its attempt log, committed before the mark, names the
    target that took it; only a cut at that log's own COMMIT, not one of these, may send it
    again, with the same ``webhook-id``)."""
    receiver = Receiver(refuse_first=1 if cut.step in ("failed", "dead") else 0)
    settings: dict[str, Any] = dict(event_lease=EVENT_LEASE, event_timeout=5.0, event_backoff=1.0,
                                    event_max_attempts=1 if cut.step == "dead" else 10)
    with receiving(receiver):
        settings.update(webhook_urls=(receiver.url,), webhook_secret=receiver.secret)
        async with ledger_of(target, **settings) as ledger:
            await ledger.create("one.txt", b"1")
            await ledger.create("two.txt", b"2")
            first = await cut_run(cut, proxy, Delivery(ledger).run_once())
            assert isinstance(first, Exception), first  # no delivery step is tried twice
        async with ledger_of(target, LATER, **settings) as later:
            await Delivery(later).run_once()
            async with later.db.transaction() as conn:
                dead = await events.listing(conn, state=events.DEAD)
                for event in dead:
                    assert cut.step == "dead", event
                    assert await events.replay(conn, event.event_id, LATER)
            if dead:
                await Delivery(later).run_once()
            async with later.db.transaction(readonly=True) as conn:
                found = await events.listing(conn)
                logs = {e.event_id: await events.find(conn, e.event_id) for e in found}
                counts = await events.counts(conn)
    assert len(found) == 2 and [e.state for e in found] == ["delivered"] * 2, found
    assert counts[events.PENDING] == 0
    assert receiver.bad_signatures == 0
    # every event taken exactly once: a lost mark is retried without sending again, and
    # the other event of the batch was sent, logged and marked before the run ended
    assert receiver.counts == {e.event_id: 1 for e in found}, receiver.counts
    assert all(payload["id"] == webhook_id for webhook_id, payload in receiver.deliveries)
    for event in found:
        entry = logs[event.event_id]
        assert entry is not None
        sends = len(entry[1])
        assert 1 <= event.attempts <= sends, (event, entry[1])


# -- processing -----------------------------------------------------------------------------
@dataclass
class Scripted:
    """A processor that answers ``verdict``, failing its first ``fail`` runs."""

    name: str
    verdict: Verdict = ACCEPT
    fail: int = 0

    async def run(self, doc: Document, read: Reader) -> Verdict:
        if self.fail > 0:
            self.fail -= 1
            raise ProcessorFailed("the scanner is away")
        return self.verdict


async def processing_case(cut: Cut, target: Target, proxy: PgProxy) -> None:
    """A held document; a worker cut at the step under test (two processors: their rows
    claimed and run together, their verdicts serialized on the document's row), then a
    worker past the lease; the document decided once, never readable before."""
    rejects = cut.step == "reject"
    names = ("content-type",) if cut.step in ("reject", "failed") else ("content-type", "scan")
    settings: dict[str, Any] = dict(processors=names, scan_command="true")

    def processors() -> dict[str, Any]:
        return {name: Scripted(name, Verdict(False, "refused") if rejects else ACCEPT,
                               fail=1 if cut.step == "failed" else 0) for name in names}

    async with ledger_of(target, **settings) as ledger:
        doc = await ledger.create("held.png", PNG, content_type="image/png", hold=True)
        assert doc.status == "held"
        worker = ProcessingWorker(ledger, processors=processors())
        first = await cut_run(cut, proxy, worker.run_once())
        assert isinstance(first, Exception), first
        # both rows are claimed together: the other's verdict is recorded before the run
        # ends with the error, and is the last one if the cut one applied
        accepts = cut.step in ("accept", "last accept")
        made_ready = accepts and cut.commit and cut.when == "after"
        assert await readable(ledger, doc.id) is made_ready  # never before the last accept
        state = await ledger.hold_state(doc.id)
        if made_ready:
            assert state is None
        elif accepts:
            assert state is not None and state.status == "held", state
            assert sorted(state.processors.values()) == ["accepted", "pending"], state
        elif rejects and cut.commit and cut.when == "after":
            assert state is not None and state.status == "rejected"
        else:
            assert state is not None and state.status == "held", state
    async with ledger_of(target, LATER, **settings) as later:
        processors_now = processors()
        for processor in processors_now.values():
            processor.fail = 0
        await ProcessingWorker(later, processors=processors_now).run_once()
        if rejects:
            assert not await readable(later, doc.id)
            state = await later.hold_state(doc.id)
            assert state is not None and state.status == "rejected"
            assert state.reason == "refused"
        else:
            assert (await later.get(doc.id)).version == 1
            assert await later.hold_state(doc.id) is None
        ready = await event_count(later, "document.ready", doc.id)
        assert ready == (0 if rejects else 1)
    await settled_and_checked(target, LATER + PAST_CUTOFFS)
    if rejects:  # through the deletion path: the blob is gone
        async with target.ledger() as ledger:
            with pytest.raises(BlobNotFound):
                await ledger.store.stat(doc.blob)


async def readable(ledger: Ledger, doc_id: str) -> bool:
    try:
        await ledger.get(doc_id)
    except NotFound:
        return False
    return True


# -- variants -------------------------------------------------------------------------------
def variant_ledger(target: Target, offset: float = 0.0) -> Ledger:
    return ledger_of(target, offset, variants=VARIANTS, variant_lease=VARIANT_LEASE)


async def variant_case(cut: Cut, target: Target, proxy: PgProxy) -> None:
    """A maker cut at its claim, confirm or attach; a second request once the first's lease
    lapsed; the sweep past the grace: one attached variant, its blob the only one."""
    async with variant_ledger(target) as ledger:
        doc = await ledger.create("photo.png", png(), content_type="image/png")
        first = await cut_run(cut, proxy, make_variant(ledger, doc.id, "thumb"))
        assert isinstance(first, Exception), first
        rows = await variant_rows(ledger)
        attached = cut.step == "attach" and cut.commit and cut.when == "after"
        assert list(rows.values()).count("attached") == (1 if attached else 0), rows
    async with variant_ledger(target, VARIANT_LEASE + 1) as later:
        made = await make_variant(later, doc.id, "thumb")
        rows = await variant_rows(later)
        assert rows[made.blob] == "attached" and list(rows.values()).count("attached") == 1
    await settled_and_checked(target)
    async with variant_ledger(target, RESOLVE_AT) as ledger:
        assert await variant_rows(ledger) == {made.blob: "attached"}
        assert await stored_variants(ledger) == [made.blob]
        assert (await make_variant(ledger, doc.id, "thumb")).blob == made.blob


async def retag_case(cut: Cut, target: Target, proxy: PgProxy) -> None:
    """Three documents whose retags are owed; the worker cut at its claim or its record; the
    next run, past the claim's lease, retags and records whatever is left: every blob
    tagged committed, nothing owed, every document readable, the settled invariants held."""
    target = dataclasses.replace(target, retag="deferred")
    async with target.ledger() as ledger:
        docs = [await ledger.create(f"owed-{n}.txt", b"owed %d" % n) for n in range(3)]
        first = await cut_run(cut, proxy, Retagger(ledger).run_once())
        assert isinstance(first, Exception), first
        recorded = cut.step == "record" and cut.commit and cut.when == "after"
        assert (await ledger.transitions.retag_lag() == 0.0) == recorded
    async with target.ledger(clock_offset=RETAG_LEASE + 1) as later:
        again = await Retagger(later).run_once()
        assert again.retagged == (0 if recorded else 3), again
        assert await later.transitions.retag_lag() == 0.0
        assert {info.name: (info.tags or {}).get("state") async for info in
                later.store.list()} == {d.blob: "committed" for d in docs}
        for n, doc in enumerate(docs):
            assert await read_all(later, doc.id) == b"owed %d" % n
    await settled_and_checked(target)


async def detach_case(cut: Cut, target: Target, proxy: PgProxy) -> None:
    """An image with its variant made; R4 or the delete cut after detaching it: either the
    whole transaction applied (the version ended, its variant ``deleting``, its event
    written) or none of it; the client's retry, then the sweep: no variant left of the ended
    version, none stored."""
    replacing = cut.step == "R4"
    kind = "document.replaced" if replacing else "document.deleted"
    async with variant_ledger(target) as ledger:
        doc = await ledger.create("photo.png", png(), content_type="image/png")
        variant = await make_variant(ledger, doc.id, "thumb")
        change: Callable[[], Awaitable[Any]] = (
            (lambda: ledger.replace(doc.id, png(120, 60), expected_version=1)) if replacing
            else (lambda: ledger.delete(doc.id, expected_version=1)))
        first = await cut_run(cut, proxy, change())
        rows = await variant_rows(ledger)
        try:
            version: int | None = (await ledger.get(doc.id)).version
        except NotFound:
            version = None
        applied = version != 1
        assert rows == {variant.blob: "deleting" if applied else "attached"}, (first, rows)
        assert await event_count(ledger, kind, doc.id) == (1 if applied else 0)
        assert applied or isinstance(first, Exception), first
        if not applied:  # the client retries
            await change()
            assert await variant_rows(ledger) == {variant.blob: "deleting"}
            assert await event_count(ledger, kind, doc.id) == 1
    await settled_and_checked(target)
    async with variant_ledger(target, RESOLVE_AT) as ledger:
        assert await variant_rows(ledger) == {}
        assert await stored_variants(ledger) == []
        if replacing:
            again = await make_variant(ledger, doc.id, "thumb")
            assert again.version == 2 and await stored_variants(ledger) == [again.blob]


CASES: dict[str, Callable[[Cut, Target, PgProxy], Awaitable[None]]] = {
    "delivery": delivery_case, "processing": processing_case, "variants": variant_case,
    "detach": detach_case, "retag": retag_case}
