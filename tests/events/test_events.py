"""Events are written by the changes themselves, in their transactions, and delivered at least
once: to in-process handlers and to a webhook receiver that verifies every signature with
the ``standardwebhooks`` package; retried with backoff, dead after the maximum, replayed;
in order per document; a paused worker whose claim lapsed marks nothing. SQLite and
PostgreSQL (what runs the same on both, on SQLite only; tests/events/test_crash.py kills and
pauses real worker processes on both)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from sqlalchemy import text

from blobledger import Ledger, PreconditionFailed
from blobledger.cli import main
from blobledger.protocol import events
from blobledger.protocol.events import Event
from blobledger.workers.delivery import Delivery, backoff
from tests.attachments.conftest import Invoice, app_engine
from tests.events.conftest import all_events, event_rows
from tests.events.receiver import Receiver
from tests.support.holds import Holds


async def test_every_change_writes_one_event_in_its_transaction(evledger: Ledger) -> None:
    ledger = evledger
    doc = await ledger.create("a.txt", b"one")
    replaced = await ledger.replace(doc.id, b"two", expected_version=1)
    with pytest.raises(PreconditionFailed):
        await ledger.delete(doc.id, expected_version=1)  # lost: no event
    await ledger.delete(doc.id, expected_version=replaced.version)

    engine = app_engine(ledger.db.url)
    try:
        from sqlalchemy.orm import sessionmaker

        sessions = sessionmaker(engine)
        first = await ledger.stage(b"%PDF first", filename="a.pdf")
        with sessions.begin() as session:
            session.add(Invoice(id=1, number="1", pdf=first))
        rolled_back = await ledger.stage(b"%PDF never")
        with sessions() as session:  # A4 and its event roll back with the owner's write
            session.get_one(Invoice, 1).pdf = rolled_back
            session.flush()
            session.rollback()
        second = await ledger.stage(b"%PDF second")
        with sessions.begin() as session:
            session.get_one(Invoice, 1).pdf = second  # replace: detach the first
        with sessions.begin() as session:
            session.delete(session.get_one(Invoice, 1))  # owner deleted: detach the second
    finally:
        engine.dispose()

    assert await event_rows(ledger) == [
        ("document.ready", doc.id), ("document.replaced", doc.id),
        ("document.deleted", doc.id),
        ("attachment.attached", first.name), ("attachment.attached", second.name),
        ("attachment.detached", first.name), ("attachment.detached", second.name)]
    found = await all_events(ledger)
    assert [e.payload["version"] for e in found[:3]] == [1, 2, 2]
    assert found[1].payload["previous_blob"] == doc.blob
    assert found[0].payload["sha256"] == doc.sha256 and found[0].payload["size"] == 3
    assert found[3].payload["owner"] == {"table": "test_invoices", "key": "1",
                                         "column": "pdf"}
    assert found[3].payload["filename"] == "a.pdf"
    assert len({e.event_id for e in found}) == len(found)


async def test_a_document_s_events_name_its_bucket(evledger: Ledger) -> None:
    """Each document event's payload names the document's bucket (the receiver of several
    buckets' events tells them apart), on each path that writes it: C4 (on PostgreSQL one
    statement with its event), the replace, the delete."""
    ledger = evledger
    await ledger.buckets.create("photos")
    doc = await ledger.create("a.jpg", b"one", bucket="photos")
    other = await ledger.create("a.jpg", b"one")
    replaced = await ledger.replace(doc.id, b"two", expected_version=1)
    await ledger.delete(doc.id, expected_version=replaced.version)
    found = await all_events(ledger)
    assert [(e.type, e.payload["document_id"], e.payload["bucket"]) for e in found] == [
        ("document.ready", doc.id, "photos"), ("document.ready", other.id, "default"),
        ("document.replaced", doc.id, "photos"), ("document.deleted", doc.id, "photos")]


@pytest.mark.parametrize("evledger", ["sqlite"], indirect=True)
async def test_a_lost_commit_writes_no_event(evledger: Ledger, holds: Holds) -> None:
    """A writer whose C4 lost (the sweeper rolled its creation forward meanwhile) writes no
    event; the roll-forward wrote exactly one ``document.ready``."""
    ledger = evledger
    holds.at("create.after_tag")
    task = asyncio.create_task(ledger.create("late.txt", b"late"))
    await holds.wait("create.after_tag")
    from blobledger.workers.sweeper import Sweeper

    other = Ledger(ledger.db, ledger.store, ledger.settings,
                   clock_offset=ledger.settings.sweep_after + 60, migrate=False)
    await Sweeper(other).run_once()  # rolls the committed blob forward: C4 on its behalf
    holds.go("create.after_tag")
    doc = await task  # C4 lost; the writer answers the document the sweeper made ready
    assert await event_rows(ledger) == [("document.ready", doc.id)]


@pytest.mark.parametrize("evledger", ["sqlite"], indirect=True)
async def test_handlers_and_webhooks_get_every_event(evledger: Ledger,
                                                     receiver: Receiver) -> None:
    ledger = evledger
    got: list[tuple[str, str]] = []

    @ledger.on("document.ready")
    async def on_ready(event: Event) -> None:
        got.append(("async", event.type))

    @ledger.on("document.deleted")
    def on_deleted(event: Event) -> None:  # a sync handler runs in a thread
        got.append(("sync", event.type))

    doc = await ledger.create("b.txt", b"bytes")
    await ledger.delete(doc.id)
    report = await Delivery(ledger).run_once()
    assert (report.delivered, report.failures, report.pending, report.lag) == (2, 0, 0, None)
    assert got == [("async", "document.ready"), ("sync", "document.deleted")]
    assert receiver.bad_signatures == 0
    assert receiver.order(doc.id) == ["document.ready", "document.deleted"]
    assert set(receiver.counts.values()) == {1}
    assert (await Delivery(ledger).run_once()).claimed == 0  # nothing twice
    with pytest.raises(Exception, match="no event type"):
        ledger.on("document.created")


async def test_retries_back_off_then_dead_then_replay(evledger: Ledger,
                                                      receiver: Receiver) -> None:
    ledger = evledger
    receiver.refuse_all = True
    doc = await ledger.create("c.txt", b"c")
    delivery = Delivery(ledger)
    first = await delivery.run_once()
    assert (first.failures, first.retried, first.delivered) == (1, 1, 0)
    assert (await delivery.run_once()).claimed == 0  # not due before its backoff
    for attempt in (1, 2):
        ledger.clock_offset += backoff(ledger.settings, attempt) + 0.5
        report = await delivery.run_once()
        assert report.claimed == 1
    assert report.dead == 1 and report.dead_now == 1
    (event,) = await all_events(ledger)
    assert (event.state, event.attempts) == ("dead", 3)
    assert "answered 500" in (event.last_error or "")
    async with ledger.db.transaction(readonly=True) as conn:
        found = await events.find(conn, event.event_id)
    assert found is not None
    assert [(a.attempt_no, a.outcome, a.status_code) for a in found[1]] == \
        [(1, "failed", 500), (2, "failed", 500), (3, "failed", 500)]
    assert [backoff(ledger.settings, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]

    receiver.refuse_all = False
    async with ledger.db.transaction() as conn:
        assert await events.replay(conn, event.event_id, ledger.clock_offset)
        assert not await events.replay(conn, event.event_id, ledger.clock_offset)  # pending
    assert (await delivery.run_once()).delivered == 1
    assert receiver.order(doc.id) == ["document.ready"]
    assert [e.state for e in await all_events(ledger)] == ["delivered"]


async def test_order_per_document(evledger: Ledger, receiver: Receiver) -> None:
    """A failing event holds its document's later events back; another document's go. The
    backoff is a minute, so that a slow machine's second run still falls inside it."""
    ledger = Ledger(evledger.db, evledger.store,
                    evledger.settings.model_copy(update={"event_backoff": 60.0}), migrate=False)
    receiver.refuse_first = 1
    doc = await ledger.create("d.txt", b"d")
    await ledger.replace(doc.id, b"dd", expected_version=1)
    await ledger.delete(doc.id)
    report = await Delivery(ledger).run_once()
    assert (report.failures, report.delivered, report.pending) == (1, 0, 3)
    other = await ledger.create("e.txt", b"e")
    report = await Delivery(ledger).run_once()  # before the failed one's backoff ends
    assert (report.failures, report.delivered, report.pending) == (0, 1, 3)
    assert receiver.order(other.id) == ["document.ready"]
    assert receiver.order(doc.id) == []
    ledger.clock_offset += 61
    await Delivery(ledger).run_once()
    assert receiver.order(doc.id) == ["document.ready", "document.replaced",
                                      "document.deleted"]


@pytest.mark.parametrize(("evledger", "point"), [
    ("sqlite", "events.after_claim"), ("sqlite", "events.after_send"),
    ("sqlite", "events.after_mark"), ("postgresql", "events.after_send")],
    indirect=["evledger"])
async def test_a_paused_worker_marks_nothing_once_its_claim_lapsed(
        evledger: Ledger, receiver: Receiver, holds: Holds, point: str) -> None:
    """Worker A pauses at ``point``; once its lease lapsed worker B claims the event (unless
    A marked it already) and delivers it, to every target the attempt log does not say took
    it. A wakes: its mark is refused, the attempt is not counted twice."""
    ledger = evledger
    doc = await ledger.create("f.txt", b"f")
    holds.at(point)
    paused = asyncio.create_task(Delivery(ledger).run_once())
    await holds.wait(point)
    later = Ledger(ledger.db, ledger.store, ledger.settings,
                   clock_offset=ledger.settings.event_lease + 1, migrate=False)
    took_over = await Delivery(later).run_once()
    holds.go(point)
    report = await paused
    (event,) = await all_events(ledger)
    assert (event.state, event.attempts) == ("delivered", 1)
    assert receiver.order(doc.id) == ["document.ready"]
    assert receiver.bad_signatures == 0
    if point == "events.after_mark":
        assert (took_over.claimed, report.delivered, report.lost) == (0, 1, 0)
    else:
        assert (took_over.delivered, report.delivered, report.lost) == (1, 0, 1)
    # whoever came second read in the attempt log that the receiver took it: sent once
    assert list(receiver.counts.values()) == [1]


async def test_a_second_worker_claims_nothing_while_the_first_s_lease_runs(
        evledger: Ledger, receiver: Receiver, holds: Holds) -> None:
    """Schedule: worker A claims the event and pauses (``events.after_claim``) inside its
    lease; worker B runs meanwhile, at the same time: the claim's lease is the fence, so B
    claims nothing and sends nothing. A wakes and delivers the event: sent once."""
    ledger = evledger
    doc = await ledger.create("h.txt", b"h")
    async with ledger.db.transaction() as conn:  # the statements themselves
        _, first = await events.claim(conn, 10, ledger.settings.event_lease)
    async with ledger.db.transaction() as conn:
        _, second = await events.claim(conn, 10, ledger.settings.event_lease)
    assert ([e.subject for e in first], second) == ([doc.id], [])
    ledger.clock_offset += ledger.settings.event_lease + 1  # that claim lapsed
    holds.at("events.after_claim")
    paused = asyncio.create_task(Delivery(ledger).run_once())
    await holds.wait("events.after_claim")
    meanwhile = await Delivery(ledger).run_once()
    assert (meanwhile.claimed, meanwhile.delivered) == (0, 0), meanwhile
    assert receiver.counts == {}
    holds.go("events.after_claim")
    report = await paused
    assert (report.claimed, report.delivered, report.lost) == (1, 1, 0), report
    assert receiver.order(doc.id) == ["document.ready"]
    assert list(receiver.counts.values()) == [1]


async def test_a_lapsed_failure_never_marks_the_claim_that_replaced_it(
        evledger: Ledger, receiver: Receiver, holds: Holds) -> None:
    """Schedule: worker A's last allowed attempt fails and A pauses before marking it
    (``events.after_send``) past its lease; worker B claims the event, delivers it and pauses
    before its own mark; A wakes while B still holds the claim. A's failure mark is refused
    (the claim's token is B's): the event is not dead nor its attempt counted twice, and B's
    mark makes it delivered."""
    ledger = evledger
    # a backoff no slow run outlasts: each run below makes exactly one attempt
    ledger.settings = ledger.settings.with_(event_backoff=60.0)
    receiver.refuse_first = 3  # attempts 1 and 2 before, then A's (the last allowed: 3)
    doc = await ledger.create("i.txt", b"i")
    for attempt in (1, 2):
        report = await Delivery(ledger).run_once()
        assert (report.claimed, report.retried) == (1, 1), report
        ledger.clock_offset += backoff(ledger.settings, attempt) + 1
    point = "events.after_send"
    holds.at(point)
    holds.at(point)
    worker_a = asyncio.create_task(Delivery(ledger).run_once())
    await holds.wait(point)
    later = Ledger(ledger.db, ledger.store, ledger.settings, migrate=False,
                   clock_offset=ledger.clock_offset + ledger.settings.event_lease + 1)
    worker_b = asyncio.create_task(Delivery(later).run_once())
    await holds.wait(point, 2)  # B delivered (the receiver took it) and has not marked
    assert receiver.order(doc.id) == ["document.ready"]
    holds.go(point, 0)
    report_a = await worker_a
    assert (report_a.dead, report_a.lost) == (0, 1), report_a
    (event,) = await all_events(ledger)
    assert (event.state, event.attempts) == ("pending", 2)
    holds.go(point, 1)
    report_b = await worker_b
    assert (report_b.delivered, report_b.lost) == (1, 0), report_b
    (event,) = await all_events(ledger)
    assert (event.state, event.attempts) == ("delivered", 3)
    assert list(receiver.counts.values()) == [1]


@pytest.mark.parametrize("evledger", ["sqlite"], indirect=True)
async def test_the_events_command(evledger: Ledger, receiver: Receiver, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    ledger = evledger
    for key in [k for k in os.environ if k.startswith("BLOBLEDGER_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    env = {"BLOBLEDGER_DATABASE_URL": ledger.db.url, "BLOBLEDGER_STORE_URL": ledger.store.url,
           "BLOBLEDGER_WEBHOOK_URLS": receiver.url,
           "BLOBLEDGER_WEBHOOK_SECRET": receiver.secret, "BLOBLEDGER_EVENT_MAX_ATTEMPTS": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    receiver.refuse_all = True
    doc = await ledger.create("g.txt", b"g")

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = await asyncio.to_thread(run, "events", "deliver")
    assert code == 1 and '"dead": 1' in out
    code, out, _ = await asyncio.to_thread(run, "events", "list", "--state", "dead")
    assert code == 0 and out.count("\n") == 1 and doc.id in out
    event_id = out.split("\t")[1]
    code, out, _ = await asyncio.to_thread(run, "events", "show", event_id)
    assert code == 0 and "answered 500" in out
    shown = dict(line.split(":", 1) for line in out.splitlines() if not line.startswith(" "))
    assert shown["state"].strip() == "dead" and "log" in shown and "data.document_id" in shown
    # every value starts in one column, one space at least after the longest name
    assert len({len(value) - len(value.lstrip(" ")) + len(key)
                for key, value in shown.items()}) == 1
    assert min(len(value) - len(value.lstrip(" ")) for value in shown.values()) >= 1
    receiver.refuse_all = False
    code, out, _ = await asyncio.to_thread(run, "events", "replay", event_id)
    assert (code, out) == (0, f"{event_id}\tpending\n")
    code, out, err = await asyncio.to_thread(run, "events", "replay", event_id)
    assert code == 1 and err == f"blobledger: error: event {event_id} is pending: only " \
        "dead or delivered events are replayed\n"
    code, out, _ = await asyncio.to_thread(run, "events", "deliver")
    assert code == 0 and '"delivered": 1' in out
    code, _, err = await asyncio.to_thread(run, "events", "show", "evt_nope")
    assert code == 1 and err.count("\n") == 1 and "no event" in err
    code, out, _ = await asyncio.to_thread(run, "events", "list", "--document", doc.id,
                                           "--json")
    assert code == 0 and '"state": "delivered"' in out
    async with ledger.db.transaction(readonly=True) as conn:
        assert (await conn.execute(text("SELECT count(*) FROM event_deliveries"))) \
            .scalar_one() == 2
        # the attempt log keeps what the receiver answered: 500, then 204 (not a made-up 200)
        assert list((await conn.execute(text(
            "SELECT status_code FROM event_deliveries ORDER BY id"))).scalars()) == [500, 204]
