"""The deterministic simulation in its short form (scripts/simulate runs it for longer)."""

from __future__ import annotations

import asyncio

import pytest

from tests.sim.loop import SimLoop
from tests.sim.sim import run

#: a crash cancels an actor wherever it is, also between making a coroutine (a sweeper's
#: batch for its gather) and awaiting it: Python then warns that it was never awaited, which
#: is the crash being simulated, not a fault of the code under test
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _order(seed: int) -> list[str]:
    loop = SimLoop(seed)
    seen: list[str] = []

    async def actor(name: str) -> None:
        for i in range(5):
            seen.append(f"{name}{i}@{loop.time():.0f}")
            await asyncio.sleep(0 if i % 2 else 10)

    async def main() -> None:
        await asyncio.gather(*(actor(n) for n in "abc"))

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return seen


def test_the_loop_replays_a_seed_and_its_virtual_clock() -> None:
    assert _order(7) == _order(7)
    assert len({tuple(_order(seed)) for seed in range(8)}) > 1  # the seed decides the order
    assert _order(7)[-1].endswith("@20")  # two sleeps of 10 s before the last, no wall time


def test_a_run_replays_exactly_from_its_seed() -> None:
    first, second = run(3), run(3)
    assert first.trace == second.trace and first.steps == second.steps
    assert run(4).trace != first.trace


@pytest.mark.parametrize("seed", range(3))
def test_the_ledger_keeps_its_invariants_and_its_answers(seed: int) -> None:
    result = run(seed)
    assert result.violation is None, (result.seed, result.violation, result.trace)
    assert result.inconclusive is None
    assert result.acknowledged > 0 and result.operations > 0
