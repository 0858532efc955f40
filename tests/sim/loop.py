"""A deterministic asyncio event loop: virtual time, and the next ready callback chosen by a
seeded ``random.Random``, so every ``await`` that yields is a possible preemption and a run
replays exactly from its seed.

``time()`` is virtual: when nothing is ready it jumps to the next timer (a sleep of an hour
costs nothing). No callback arrives from another thread: the simulation's SQLite runs on the
loop's thread (:mod:`tests.sim.db`) and ``run_in_executor`` runs its function at once.
``exclusive``: while set, only that task's callbacks (and callbacks bound to no task, which
merely complete futures) are chosen: the checks run while the world is stopped.
"""

from __future__ import annotations

import asyncio
import heapq
import random
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")


def task_of(handle: asyncio.Handle) -> asyncio.Task[Any] | None:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    return owner if isinstance(owner, asyncio.Task) else None


def await_point(task: asyncio.Task[Any]) -> str:
    """Where the task is suspended: the innermost frame of blobledger's code (else any)."""
    coro: Any = task.get_coro()
    where = "(the harness)"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            path = frame.f_code.co_filename
            if "blobledger" in path:
                where = f"{path.split('blobledger/', 1)[-1]}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return where


class SimLoop(asyncio.BaseEventLoop):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self._now = 0.0
        self.steps = 0
        self.exclusive: asyncio.Task[Any] | None = None
        #: await points at which a task was passed over for another
        self.preempted: dict[str, int] = {}
        self.on_step: Callable[[], None] | None = None

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        """A clock jump: every timer due by then fires next."""
        self._now += seconds

    def _write_to_self(self) -> None:
        pass

    def _process_events(self, event_list: Any) -> None:
        pass

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:
            future.set_exception(exc)
        return future

    _ready: Any  # BaseEventLoop's own (not in its stubs)
    _scheduled: Any

    def _eligible(self) -> list[int]:
        if self.exclusive is None:
            return list(range(len(self._ready)))
        return [i for i, h in enumerate(self._ready)
                if (t := task_of(h)) is None or t is self.exclusive]

    def _run_once(self) -> None:
        scheduled = self._scheduled
        while scheduled and scheduled[0]._cancelled:
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
        eligible = self._eligible()
        if not eligible and scheduled:
            self._now = max(self._now, scheduled[0]._when)
        while scheduled and scheduled[0]._when <= self._now:
            handle = heapq.heappop(scheduled)
            handle._scheduled = False
            if not handle._cancelled:
                self._ready.append(handle)
        eligible = self._eligible()
        if not eligible and self._ready and not scheduled:
            # the exclusive task waits on what a stopped one holds: let the world run
            eligible = list(range(len(self._ready)))
        if not eligible:
            if scheduled:
                return
            raise RuntimeError("deadlock: nothing ready and no timer pending")
        choice = eligible[self.rng.randrange(len(eligible))]
        handle = self._ready[choice]
        if choice != eligible[0]:
            passed = task_of(self._ready[eligible[0]])
            if passed is not None:
                point = await_point(passed)
                self.preempted[point] = self.preempted.get(point, 0) + 1
        del self._ready[choice]
        self.steps += 1
        if not handle._cancelled:
            handle._run()
        if self.on_step is not None:
            self.on_step()
