"""The delivery side's statements on their own: a claim's marks land on its own event, under
its own token only; a claim passes over events another worker's lease still holds; a replay
sends its own event again only."""

from __future__ import annotations

from datetime import UTC, datetime

from blobledger import Ledger
from blobledger.protocol import events
from tests.events.conftest import all_events


async def test_each_mark_lands_on_its_own_event_under_its_own_claim_only(
        evledger: Ledger) -> None:
    """A claim of four events: each mark (delivered, failed, dead) moves its event alone.
    Then the fourth's claim lapses and another claim takes it: every mark under the lapsed
    token is refused and leaves the new claim's event as it was, which its own mark moves."""
    ledger, lease = evledger, evledger.settings.event_lease
    docs = [await ledger.create(f"{n}.txt", b"x") for n in "abcd"]
    async with ledger.db.transaction() as conn:
        token, claimed = await events.claim(conn, 10, lease)
    assert [e.subject for e in claimed] == [d.id for d in docs]
    first, second, third, fourth = (e.event_id for e in claimed)
    async with ledger.db.transaction() as conn:
        assert await events.mark_delivered(conn, first, token)
        assert await events.mark_failed(conn, second, token, "no", dead=False, retry_in=60)
        assert await events.mark_failed(conn, third, token, "no", dead=True, retry_in=60)
    states = {e.event_id: (e.state, e.attempts) for e in await all_events(ledger)}
    assert states == {first: ("delivered", 1), second: ("pending", 1), third: ("dead", 1),
                      fourth: ("pending", 0)}, states
    later = lease + 1
    async with ledger.db.transaction() as conn:
        again, taken = await events.claim(conn, 10, lease, offset=later)
    assert [e.event_id for e in taken] == [fourth]
    async with ledger.db.transaction() as conn:
        assert not await events.mark_delivered(conn, fourth, token, offset=later)
        assert not await events.mark_failed(conn, fourth, token, "late", dead=False,
                                            retry_in=60, offset=later)
        assert not await events.mark_failed(conn, fourth, token, "late", dead=True,
                                            retry_in=60, offset=later)
    (event,) = [e for e in await all_events(ledger) if e.event_id == fourth]
    assert (event.state, event.attempts, event.last_error) == ("pending", 0, None)
    async with ledger.db.transaction() as conn:
        assert await events.mark_delivered(conn, fourth, again, offset=later)


async def test_a_claim_passes_over_an_event_another_workers_lease_holds(
        evledger: Ledger) -> None:
    """Two events of two documents, claims of one event each: the second claim, while the
    first's lease runs, takes the next due event, not nothing."""
    ledger, lease = evledger, evledger.settings.event_lease
    one = await ledger.create("one.txt", b"1")
    two = await ledger.create("two.txt", b"2")
    async with ledger.db.transaction() as conn:
        _, first = await events.claim(conn, 1, lease)
    async with ledger.db.transaction() as conn:
        _, second = await events.claim(conn, 1, lease)
    assert ([e.subject for e in first], [e.subject for e in second]) == ([one.id], [two.id])


async def test_a_replay_sends_its_own_event_again_only(evledger: Ledger) -> None:
    """Two events a target took: replaying one makes it pending with its log's success
    marked replayed (the target is sent it again); the other stays delivered, its success
    kept (a retry of it would skip that target)."""
    ledger, lease = evledger, evledger.settings.event_lease
    await ledger.create("kept.txt", b"k")
    await ledger.create("again.txt", b"a")
    async with ledger.db.transaction() as conn:
        token, claimed = await events.claim(conn, 10, lease)
    kept, again = (e.event_id for e in claimed)
    now = datetime.now(UTC)
    async with ledger.db.transaction() as conn:
        for event_id in (kept, again):
            await events.log_attempt(conn, event_id, 1, "handler:t", token, now, now, ok=True)
            assert await events.mark_delivered(conn, event_id, token)
    async with ledger.db.transaction() as conn:
        assert await events.replay(conn, again)
        assert await events.succeeded_targets(conn, kept) == {"handler:t"}
        assert await events.succeeded_targets(conn, again) == set()
    states = {e.event_id: e.state for e in await all_events(ledger)}
    assert states == {kept: "delivered", again: "pending"}, states


async def test_a_claim_passes_over_events_already_delivered(evledger: Ledger) -> None:
    """A delivered event is never due again: a claim of one event, after one was delivered,
    takes the next pending one (older delivered events never fill its limit)."""
    ledger, lease = evledger, evledger.settings.event_lease
    await ledger.create("sent.txt", b"s")
    async with ledger.db.transaction() as conn:
        token, (sent,) = await events.claim(conn, 1, lease)
        assert await events.mark_delivered(conn, sent.event_id, token)
    waiting = await ledger.create("waiting.txt", b"w")
    async with ledger.db.transaction() as conn:
        _, taken = await events.claim(conn, 1, lease)
    assert [e.subject for e in taken] == [waiting.id]
