"""Pausing instead of killing: a child stops itself (SIGSTOP) at a failpoint, the resolvers
run meanwhile with the clock far past every cutoff, then the child is woken (SIGCONT) to a
clock that moved on as far, finishes, and reports what its caller was told."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from blobledger.workers.invariants import InvariantReport, check
from tests.crash.child import Job, Target, main
from tests.crash.harness import CHILD_TIMEOUT, PAST_CUTOFFS, RESOLVE_AT, settle
from tests.support.forkserver import forkserver_context

#: the forkserver context of the kill tests (one server, blobledger preloaded)
_CONTEXT = forkserver_context("tests.crash.child")
#: the paused writer wakes after the resolvers' last step (each a grace period apart)
WAKE_AT = RESOLVE_AT + PAST_CUTOFFS
#: the final resolution: past every cutoff of what the woken writer (or sweeper) left
FINAL_AT = WAKE_AT + RESOLVE_AT
#: errors a woken writer may report: the project's own, never a raw storage answer
STORE_ERRORS = ("StoreError", "StoreUnavailable")


@dataclass(frozen=True)
class Outcome:
    """What the woken child's caller was told (see ``tests.crash.child``)."""

    answer: dict[str, Any]

    @property
    def ok(self) -> bool:
        return "error" not in self.answer

    @property
    def error(self) -> str:
        return str(self.answer.get("error", ""))

    def clear_error(self) -> bool:
        """A ``BlobLedgerError`` that is not a storage error passed through."""
        classes = self.answer.get("classes", [])
        return ("BlobLedgerError" in classes
                and not any(name in classes for name in STORE_ERRORS))

    def __str__(self) -> str:
        if self.ok:
            return json.dumps(self.answer, sort_keys=True)
        return f"{self.error}: {self.answer.get('message')}"


def process_state(pid: int) -> str:
    """The state letter of ``/proc/<pid>/stat`` (``T``: stopped); '' once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except FileNotFoundError:
        return ""
    return text.rpartition(")")[2].split()[0]


class Paused:
    """A child stopped at its failpoint."""

    def __init__(self, process: BaseProcess, job: Job) -> None:
        self.process = process
        self.job = job

    async def resume(self) -> Outcome:
        """SIGCONT; wait for it to finish; what it reported."""
        assert self.process.pid is not None and self.job.report is not None
        os.kill(self.process.pid, signal.SIGCONT)
        await asyncio.to_thread(self.process.join, CHILD_TIMEOUT)
        if self.process.exitcode is None:
            raise AssertionError(f"woken child for {self.job.failpoints} hung for "
                                 f"{CHILD_TIMEOUT}s")
        assert self.process.exitcode == 0, (
            f"woken child for {self.job.failpoints} exited {self.process.exitcode}")
        return Outcome(json.loads(Path(self.job.report).read_text()))


@asynccontextmanager
async def paused(job: Job) -> AsyncIterator[Paused]:
    """Run the job in a forked child until it has stopped itself at its failpoint; a child
    still alive when the block ends (a failed test) is killed, stopped or not."""
    assert job.report is not None and job.wake_offset is not None
    process = _CONTEXT.Process(target=main, args=(job,), daemon=True)
    process.start()
    assert process.pid is not None
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while process_state(process.pid) != "T":
            if process.exitcode is not None:
                report = Path(job.report)
                told = report.read_text() if report.exists() else "nothing"
                raise AssertionError(f"{job.op} under {job.failpoints}: child exited "
                                     f"{process.exitcode} before the point; it reported {told}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{job.op} under {job.failpoints}: no stop within "
                                     f"{CHILD_TIMEOUT}s")
            await asyncio.sleep(0.005)
        yield Paused(process, job)
    finally:
        if process.exitcode is None:
            process.kill()  # SIGKILL ends a stopped process too
            await asyncio.to_thread(process.join, 10)


async def resolve_meanwhile(target: Target) -> list[str]:
    """While the child sleeps: sweeper passes (the clock stepping past the grace between
    them, so the deletion path runs too) and ``reconcile --fix``, far past every cutoff."""
    async with target.ledger(clock_offset=RESOLVE_AT) as ledger:
        return await settle(ledger)


async def resolve_finally(target: Target) -> tuple[list[str], InvariantReport]:
    """After the child finished: resolve once more, later still, and check (settled)."""
    async with target.ledger(clock_offset=FINAL_AT) as ledger:
        steps = await settle(ledger)
        return steps, await check(ledger, settled=True)
