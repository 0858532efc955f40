"""Races on every backend combination: many writers on one name or one version, and a delete
racing a replace. Exactly one winner each time, and after a sweep past every cutoff the
store holds exactly the blobs of ready documents (invariants checked, settled)."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Coroutine
from typing import Any, TypeVar

from blobledger import Ledger, NameTaken, NotFound, PreconditionFailed
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper

T = TypeVar("T")
CREATORS = 50
REPLACERS = 20
DELAYS = [0.0, 0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1]  # the delete starts this much later
ROUNDS = len(DELAYS)


async def settle(ledger: Ledger) -> None:
    """Sweep with the clock past sweep_after and the grace; then the checker must be clean
    and every stored blob must belong to a ready document."""
    real = ledger.clock_offset
    ledger.clock_offset = ledger.settings.sweep_after + ledger.settings.delete_grace + 60
    try:
        for _ in range(3):
            await Sweeper(ledger).run_once()
            ledger.clock_offset += ledger.settings.delete_grace + 1
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
        docs = [d async for d in ledger.list()]
        stored = {i.name async for i in ledger.store.list(ledger.settings.blob_prefix)}
        assert stored == {d.blob for d in docs}
    finally:
        ledger.clock_offset = real


async def test_concurrent_creates_of_one_name_have_one_winner(ledger: Ledger) -> None:
    bodies = [f"body {i}".encode() * 100 for i in range(CREATORS)]
    results = await asyncio.gather(*[ledger.create("same.txt", body) for body in bodies],
                                   return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, NameTaken) for r in results if isinstance(r, BaseException))
    doc = winners[0]
    data = b"".join([c async for c in ledger.read(doc.id)])
    assert data in bodies and doc.sha256 == hashlib.sha256(data).hexdigest()
    await settle(ledger)
    assert [d.id async for d in ledger.list()] == [doc.id]


async def test_concurrent_replaces_of_one_version_have_one_winner(ledger: Ledger) -> None:
    doc = await ledger.create("r.txt", b"original")
    bodies = [f"replacement {i}".encode() * 50 for i in range(REPLACERS)]
    results = await asyncio.gather(
        *[ledger.replace(doc.id, body, expected_version=1) for body in bodies],
        return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1, results
    assert all(isinstance(r, PreconditionFailed) for r in results
               if isinstance(r, BaseException)), results
    current = await ledger.get(doc.id)
    assert current.version == 2 and current.blob == winners[0].blob
    assert b"".join([c async for c in ledger.read(doc.id)]) == bodies[results.index(winners[0])]
    await settle(ledger)
    assert (await ledger.get(doc.id)).version == 2


async def test_delete_racing_replace(ledger: Ledger) -> None:
    outcomes: Counter[str] = Counter()
    for n in range(ROUNDS):
        doc = await ledger.create(f"d{n}.txt", b"old" * 1000)
        replaced, deleted = await asyncio.gather(
            ledger.replace(doc.id, b"new" * 1000, expected_version=1),
            _later(DELAYS[n], ledger.delete(doc.id, expected_version=1)),
            return_exceptions=True)
        if isinstance(deleted, BaseException):  # the replace won; the delete saw v2
            assert isinstance(deleted, PreconditionFailed), deleted
            assert not isinstance(replaced, BaseException), replaced
            assert b"".join([c async for c in ledger.read(doc.id)]) == b"new" * 1000
            outcomes["replace won"] += 1
        else:  # the delete won; the replace found the document gone or moved
            assert isinstance(replaced, (NotFound, PreconditionFailed)), replaced
            try:
                await ledger.get(doc.id)
                raise AssertionError("a deleted document is still visible")
            except NotFound:
                pass
            outcomes["delete won"] += 1
    assert sum(outcomes.values()) == ROUNDS
    await settle(ledger)


async def _later(seconds: float, coro: Coroutine[Any, Any, T]) -> T:
    await asyncio.sleep(seconds)
    return await coro
