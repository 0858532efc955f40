"""Group commit of the one-statement C1 and C4 (``protocol/group.py``), on PostgreSQL:
concurrent creations queued behind a C1 (or a C4) in flight are sent together, one round
trip and one commit, and each keeps its own outcome. A name taken fails only its own
creation; a compare-and-set lost by one run fails only that creation; a connection lost under
a batch sends each run to its own recovery (C1 looks for its rows and runs once more, C4
runs once more), and every creation ends once, acknowledged and readable.

Each case records the batches that were sent (the group's own ``many``, wrapped: the real
statement still runs), so that it can tell that the run it is about went in a batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from blobledger.errors import IntentLost, NameTaken
from blobledger.protocol.documents import Document
from blobledger.protocol.group import LANES, Group
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import check
from tests.crash.child import Target
from tests.crash.harness import RESOLVE_AT, read_all, settle
from tests.crash.test_single_statements import deferred_target, events_of
from tests.ledger.test_fencing import outcome, started
from tests.support.holds import Holds
from tests.support.pgproxy import PgProxy, When

N = 12  # creations at once


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


def recorded(group: Group[dict[str, Any], Any], key: str) -> list[list[str]]:
    """Each batch the group sends from now on, as its runs' ``key`` parameter (C4 names its
    document only in its event's payload: ``e_payload``), in order (the batch is sent as
    before: the real statement runs)."""
    batches: list[list[str]] = []
    many: Callable[[Sequence[dict[str, Any]]], Awaitable[Sequence[Any]]] = group.many

    async def recording(runs: Sequence[dict[str, Any]]) -> Sequence[Any]:
        batches.append([run[key] for run in runs])
        return await many(runs)

    group.many = recording
    return batches


async def through(proxy: PgProxy, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    direct = await deferred_target(tmp_path, request)
    return dataclasses.replace(direct, database_url=proxy.url(direct.database_url))


async def all_once(ledger: Ledger, docs: Sequence[Document | BaseException],
                   names: Sequence[str], also: Sequence[str] = ()) -> None:
    """Every creation acknowledged, once, readable, its event written once (``also``: the
    other documents there); invariants."""
    assert all(isinstance(d, Document) for d in docs), docs
    assert sorted([d.name async for d in ledger.list()]) == sorted([*names, *also])
    for n, doc in enumerate(docs):
        assert isinstance(doc, Document)
        assert (doc.status, doc.version) == ("ready", 1)
        assert await read_all(ledger, doc.id) == b"bytes %d" % n
    ids = {d.id for d in docs if isinstance(d, Document)}
    ready = [subject for kind, subject in await events_of(ledger)
             if kind == "document.ready" and subject in ids]
    assert sorted(ready) == sorted(ids)
    report = await check(ledger)
    assert report.ok, report.render()


async def test_two_runs_at_once_go_at_once_and_a_third_queues() -> None:
    """With two runs of a step in flight (the group's lanes) a third queues and goes in one
    batch with those after it; the second of two never waits for the first's round trip
    (with one lane it did, and was then sent alone all the same: a batch of one saves
    nothing, and at two creations in flight that was every wait the group made)."""
    sent: list[list[int]] = []

    async def many(runs: Sequence[int]) -> list[int]:
        sent.append(list(runs))
        return list(runs)

    group: Group[int, int] = Group(many)
    gates = [asyncio.Event() for _ in range(5)]
    started: list[int] = []

    def alone(n: int) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            started.append(n)
            await gates[n].wait()
            return n
        return run

    runs = [asyncio.create_task(group.run(n, alone(n))) for n in range(4)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert started == [0, 1], started  # the second did not wait for the first
    gates[1].set()  # a lane frees: the two queued go as one batch
    assert await asyncio.gather(*runs[1:]) == [1, 2, 3]
    assert sent == [[2, 3]], sent
    gates[0].set()
    assert await runs[0] == 0
    assert group.sizes == {1: 2, 2: 1}
    gates[4].set()
    assert await group.run(4, alone(4)) == 4  # idle again: alone, at once
    assert sent == [[2, 3]] and group.sizes == {1: 3, 2: 1}


async def test_concurrent_creations_share_their_round_trips(
        tmp_path: Path, request: pytest.FixtureRequest, proxy: PgProxy) -> None:
    """Twelve creations at once: fewer C1 and C4 statements' round trips than creations
    (the batches' runs), and each creation as if alone."""
    target = await through(proxy, tmp_path, request)
    async with target.ledger() as ledger:
        await ledger.create("warm.txt", b"warm")
        c1s = recorded(ledger.transitions._c1s, "d_name")
        c4s = recorded(ledger.transitions._c4s, "d_id")
        names = [f"at-once-{n}.txt" for n in range(N)]
        docs = await asyncio.gather(*(ledger.create(name, b"bytes %d" % n)
                                      for n, name in enumerate(names)))
        assert any(len(batch) > 1 for batch in c1s), c1s
        assert any(len(batch) > 1 for batch in c4s), c4s
        await all_once(ledger, docs, names, also=["warm.txt"])


async def test_a_taken_name_fails_only_its_own_creation_in_a_batch(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target = await deferred_target(tmp_path, request)
    async with target.ledger() as ledger:
        first = await ledger.create("taken.txt", b"the first")
        c1s = recorded(ledger.transitions._c1s, "d_name")
        names = [f"free-{n}.txt" for n in range(N)]
        names[N // 2] = "taken.txt"
        results = await asyncio.gather(*(ledger.create(name, b"bytes %d" % n)
                                         for n, name in enumerate(names)),
                                       return_exceptions=True)
        assert any("taken.txt" in batch and len(batch) > 1 for batch in c1s), c1s
        assert isinstance(results[N // 2], NameTaken), results[N // 2]
        others = [r for n, r in enumerate(results) if n != N // 2]
        assert all(isinstance(r, Document) and r.status == "ready" for r in others), others
        assert await read_all(ledger, first.id) == b"the first"
        for n, doc in enumerate(results):
            if isinstance(doc, Document):
                assert await read_all(ledger, doc.id) == b"bytes %d" % n
        report = await check(ledger)
        assert report.ok, report.render()


async def test_a_lost_intent_fails_only_its_own_creation_in_a_batch(
        tmp_path: Path, request: pytest.FixtureRequest, holds: Holds) -> None:
    """A writer held after its upload while the sweeper, the deletion path and
    ``reconcile --fix`` run far past every cutoff; other writers then reach C4 beside it. Its
    C4 goes in a batch with theirs: its compare-and-set loses (IntentLost, nothing left of
    it), theirs win."""
    target = await deferred_target(tmp_path, request)
    point = "create.after_upload"
    async with target.ledger() as ledger:
        holds.at(point)
        victim = started(lambda: ledger.create("paused.txt", b"paused"))
        await holds.wait(point)
        async with target.ledger(clock_offset=RESOLVE_AT) as other:
            await settle(other)
        names = [f"beside-{n}.txt" for n in range(N)]
        for _ in names:
            holds.at(point)
        writers = [asyncio.create_task(ledger.create(name, b"bytes %d" % n))
                   for n, name in enumerate(names)]
        await holds.wait(point, N + 1)
        c4s = recorded(ledger.transitions._c4s, "e_payload")
        for first in range(1, LANES + 1):  # others first: their C4s run alone, in flight
            holds.go(point, first)
        await asyncio.sleep(0)
        holds.release_all()  # the rest queue behind them, the paused writer among them
        lost = await outcome(victim)
        assert isinstance(lost, IntentLost), lost
        assert any(len(batch) > 1 and any("paused.txt" in run for run in batch)
                   for batch in c4s), c4s
        docs = [await outcome(w) for w in writers]
        await all_once(ledger, docs, names)
    async with target.ledger(clock_offset=RESOLVE_AT) as later:
        await settle(later)
        assert sorted([d.name async for d in later.list()]) == sorted(names)
        report = await check(later, settled=True)
        assert report.ok, report.render()


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("step", ["c1_document", "c4_blob"])
async def test_a_connection_lost_under_a_batch_leaves_each_creation_once(
        tmp_path: Path, request: pytest.FixtureRequest, proxy: PgProxy, step: str,
        when: When) -> None:
    """The connection cut at a batch's first run (the step's statement after the group's
    lanes: the first ones ran alone), before it is sent (nothing of the batch applied) or
    after the whole batch was answered (all of it applied, the writers never hear): every
    run's own recovery (C1 looks for its rows and runs once more; C4 runs once more and
    recognises its own first run) ends its creation once."""
    target = await through(proxy, tmp_path, request)
    async with target.ledger() as ledger:
        await ledger.create("warm.txt", b"warm")
        group = ledger.transitions._c1s if step == "c1_document" else ledger.transitions._c4s
        batches = recorded(group, "d_id")
        proxy.arm(rf"^\s*WITH {step}\b", when, nth=LANES + 1)
        names = [f"cut-{n}.txt" for n in range(N)]
        docs = await asyncio.gather(*(ledger.create(name, b"bytes %d" % n)
                                      for n, name in enumerate(names)),
                                    return_exceptions=True)
        assert not proxy.armed, "the cut never fired"
        assert batches and len(batches[0]) > 1, batches
        await all_once(ledger, docs, names, also=["warm.txt"])
