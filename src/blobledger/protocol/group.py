"""Group commit: concurrent runs of one step (C1, C4) gathered into one round trip.

A step that finds fewer than :data:`LANES` runs of its kind in flight (and none queued) runs
alone, at once (no added latency). Runs that arrive while that many are in flight queue;
when one ends, everything queued is sent as one batch (:class:`Group`'s ``many``: the same
statement once per run, in one round trip and one implicit transaction on PostgreSQL, all
applied or none), and so on while runs keep arriving. Two lanes, not one: with one, at two
concurrent creations the second's statement waited for the first's round trip and was then
sent alone all the same (a batch of one saves nothing), which at two creations in flight
was every wait the group made (bench/RESULTS.md, "Where the create's time goes at 20 ms on
Azurite").

Each run keeps its own outcome:

- the batch applied: each run gets its own result (C4: its own row, or none if its own
  compare-and-set lost, decided by the same statement as alone);
- the batch's connection was lost (it may or may not have applied, all or nothing): each run
  gets that error, and its own recovery decides, as it would alone (C1 looks for its rows and
  runs once more, C4 runs once more and recognises its own first run);
- any other failure (one run's name taken, one run's value refused, a deadlock): nothing of
  the batch applied, and each run is sent again alone, where its own error is its own.

A run whose caller was cancelled before its batch was sent is left out of it.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

from blobledger.db import connection_lost

P = TypeVar("P")
R = TypeVar("R")

#: the most runs of one batch
LIMIT = 64
#: runs alone or batches of one step in flight at once before the next runs queue
LANES = 2


class _Alone:
    """The answer that sends a run again on its own (its batch failed as a whole)."""


ALONE = _Alone()


class Group(Generic[P, R]):
    """One step's group commit. ``many`` runs a batch (two runs or more) and returns each
    run's result in order. :attr:`sizes` counts the batches sent by their size (1: a run
    alone), for the benchmarks and the tests."""

    def __init__(self, many: Callable[[Sequence[P]], Awaitable[Sequence[R]]],
                 limit: int = LIMIT, lanes: int = LANES) -> None:
        if lanes < 1:
            raise ValueError("a group needs at least one lane")
        self.many = many
        self.limit = limit
        self.lanes = lanes
        self.sizes: dict[int, int] = {}
        self._queue: list[tuple[P, asyncio.Future[R | _Alone]]] = []
        self._in_flight = 0  # runs alone and the drainer's batches
        self._draining = False
        self._drainer: asyncio.Task[None] | None = None  # held: a task only weakly referenced
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, params: P, alone: Callable[[], Awaitable[R]]) -> R:
        """The step's result for ``params``: run ``alone`` at once if fewer than
        :attr:`lanes` runs of this step are in flight and none is queued, else in the next
        batch."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a ledger used from another event loop: a fresh start
            self._loop, self._queue, self._in_flight, self._draining = loop, [], 0, False
        if self._in_flight < self.lanes and not self._queue:
            self._in_flight += 1
            try:
                return await self._alone(alone)
            finally:
                self._in_flight -= 1
                self._next()
        waiting: asyncio.Future[R | _Alone] = loop.create_future()
        self._queue.append((params, waiting))
        result = await waiting
        if isinstance(result, _Alone):
            return await self._alone(alone)
        return result

    async def _alone(self, alone: Callable[[], Awaitable[R]]) -> R:
        self.sizes[1] = self.sizes.get(1, 0) + 1
        return await alone()

    def _next(self) -> None:
        """After a run or a batch: send what queued meanwhile (in one lane, the drainer's),
        unless the drainer is at it already."""
        if self._queue and not self._draining:
            self._draining = True
            self._in_flight += 1
            self._drainer = _drainer(self._drain())

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = [run for run in self._queue[:self.limit] if not run[1].done()]
                del self._queue[:self.limit]
                if len(batch) == 1:  # one run: alone, in its caller's task
                    batch[0][1].set_result(ALONE)
                elif batch:
                    await self._send(batch)
        finally:
            self._in_flight -= 1
            self._draining = False
            self._next()  # queued after the loop's last look

    async def _send(self, batch: list[tuple[P, asyncio.Future[R | _Alone]]]) -> None:
        self.sizes[len(batch)] = self.sizes.get(len(batch), 0) + 1
        outcomes: Sequence[R | _Alone]
        try:
            outcomes = await self.many([params for params, _ in batch])
        except Exception as exc:
            if connection_lost(exc):  # all applied or none: each run's own recovery
                for _, waiting in batch:
                    if not waiting.done():
                        waiting.set_exception(exc)
                return
            outcomes = [ALONE] * len(batch)  # nothing applied: each on its own
        except BaseException:  # the loop is ending: so are the runs that wait
            for _, waiting in batch:
                waiting.cancel()
            raise
        for (_, waiting), outcome in zip(batch, outcomes, strict=True):
            if not waiting.done():
                waiting.set_result(outcome)


def _drainer(drain: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """The task that sends the batches, in a context of its own: a batch belongs to none of
    its runs' callers, nor to the step whose task happened to start it (a tracing span
    current there would be its statement's parent; it is a root span instead)."""
    return asyncio.get_running_loop().create_task(drain, context=contextvars.Context())
