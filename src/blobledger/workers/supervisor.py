"""Background workers that cannot die unseen: each runs under a supervisor.

A worker (:class:`Worker`) is a loop that runs every ``interval`` seconds and calls the
``beat`` it is given after each run it completed. The supervisor:

- logs a worker's exception at once, with its traceback, and restarts it with exponential
  backoff and jitter (``stamina``), for as long as the service runs;
- keeps its state (:class:`WorkerState`): up or down, restarts, the last completed run, the
  last error; exported on ``/metrics`` as ``blobledger_worker_up``,
  ``blobledger_worker_restarts_total`` and ``blobledger_worker_last_success_timestamp_seconds``
  (label ``worker``), shown by ``/ops/workers`` and the web page;
- judges it (:meth:`WorkerState.problem`): a worker down, or without a completed run, for
  longer than twice its interval plus ``BLOBLEDGER_WORKER_GRACE`` makes ``/readyz`` answer
  503 naming it.

A run that fails on an outage (the database or the store away) is logged by the worker
and tried again at its next interval: no restart, but no beat either, so an outage that
lasts shows as a stalled worker too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import stamina
from prometheus_client import Counter, Gauge

from blobledger.protocol.ledger import Ledger

log = logging.getLogger("blobledger.workers")

#: called by a worker after each run it completed
Beat = Callable[[], None]
#: the worker's loop: runs until cancelled, calling ``beat`` after each completed run
Loop = Callable[[Ledger, Beat], Awaitable[None]]

#: the first restart's wait (seconds); doubled after each failure up to BACKOFF_MAX
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 60.0

UP = Gauge("blobledger_worker_up", "1 while the background worker runs, 0 while it is down "
           "(between a failure and its restart)", ["worker"])
RESTARTS = Counter("blobledger_worker_restarts", "Restarts of the background worker after it "
                   "raised", ["worker"])
LAST_SUCCESS = Gauge("blobledger_worker_last_success_timestamp_seconds",
                     "When the background worker last completed a run (Unix time; 0: never)",
                     ["worker"])


class WorkerExited(RuntimeError):
    """A worker's loop returned: it is restarted as if it had raised."""


@dataclass(frozen=True)
class Worker:
    """A background worker: its name (``sweeper``, ``retagger``, ``delivery``,
    ``processing``), how often it runs, and its loop."""

    name: str
    #: seconds between runs; None: not judged (a loop that calls no ``beat``)
    interval: float | None
    loop: Loop

    async def __call__(self, ledger: Ledger) -> None:
        """The loop alone, unsupervised (an application's own task)."""
        await self.loop(ledger, lambda: None)


@dataclass
class WorkerState:
    """What the supervisor knows of one worker (times are ``time.time()``)."""

    name: str
    interval: float | None
    grace: float
    up: bool = False
    restarts: int = 0
    started_at: float = field(default_factory=time.time)
    down_since: float | None = None
    last_success: float | None = None
    last_error: str | None = None

    def __post_init__(self) -> None:
        UP.labels(self.name).set(0)
        RESTARTS.labels(self.name)
        LAST_SUCCESS.labels(self.name).set(0)

    @property
    def allowance(self) -> float:
        """How long the worker may go without a completed run (or stay down)."""
        return float("inf") if self.interval is None else 2 * self.interval + self.grace

    def beat(self) -> None:
        self.last_success = time.time()
        LAST_SUCCESS.labels(self.name).set(self.last_success)

    def running(self) -> None:
        self.up = True
        self.down_since = None
        UP.labels(self.name).set(1)

    def failed(self, exc: BaseException) -> None:
        self.up = False
        self.down_since = time.time()
        self.last_error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
        UP.labels(self.name).set(0)

    def restarted(self) -> None:
        self.restarts += 1
        RESTARTS.labels(self.name).inc()

    def problem(self, now: float | None = None) -> str | None:
        """Why this worker makes the service not ready (None: it is well)."""
        now = time.time() if now is None else now
        if not self.up and self.down_since is not None \
                and now - self.down_since > self.allowance:
            return (f"the background worker {self.name} has been down for "
                    f"{now - self.down_since:.0f}s ({self.last_error})")
        since = self.last_success or self.started_at
        if now - since > self.allowance:
            what = "completed no run" if self.last_success is None else "completed no run since"
            return (f"the background worker {self.name} has {what} for {now - since:.0f}s "
                    f"(runs every {self.interval or 0:g}s)"
                    + (f"; last error: {self.last_error}" if self.last_error else ""))
        return None

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        problem = self.problem(now)
        return {"name": self.name, "up": self.up, "restarts": self.restarts,
                "interval_seconds": self.interval,
                "last_success": self.last_success,
                "seconds_since_success": None if self.last_success is None
                else round(now - self.last_success, 1),
                "last_error": self.last_error,
                "state": "stalled" if problem else ("running" if self.up else "restarting"),
                "problem": problem}


async def supervise(worker: Worker, ledger: Ledger, state: WorkerState, *,
                    backoff_initial: float = BACKOFF_INITIAL,
                    backoff_max: float = BACKOFF_MAX) -> None:
    """Run ``worker`` until cancelled, restarting it with backoff whenever it raises."""
    first = True
    async for attempt in stamina.retry_context(
            on=Exception, attempts=None, timeout=None, wait_initial=backoff_initial,
            wait_max=backoff_max, wait_jitter=backoff_initial):
        with attempt:
            if not first:
                state.restarted()
                log.warning("background worker %s restarted (restart %d)", worker.name,
                            state.restarts)
            first = False
            state.running()
            try:
                await worker.loop(ledger, state.beat)
                raise WorkerExited(f"the {worker.name} loop returned")
            except Exception as exc:
                state.failed(exc)
                log.exception("background worker %s failed; restarting it with backoff",
                              worker.name)
                raise


def start(workers: list[Worker], ledger: Ledger, grace: float
          ) -> tuple[dict[str, WorkerState], list[asyncio.Task[None]]]:
    """Each worker supervised in a task of its own; their states by name."""
    states = {worker.name: WorkerState(worker.name, worker.interval, grace)
              for worker in workers}
    tasks = [asyncio.create_task(supervise(worker, ledger, states[worker.name]),
                                 name=f"worker {worker.name}") for worker in workers]
    return states, tasks


def problems(states: dict[str, WorkerState]) -> dict[str, str]:
    """What makes the supervised workers not ready: a line for each such worker, by name."""
    now = time.time()
    return {name: problem for name, state in states.items()
            if (problem := state.problem(now))}
