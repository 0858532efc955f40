"""Delivery across real crashes: a worker process SIGKILLed, or stopped (SIGSTOP) until its
claim lapsed, at each step of delivery (after the claim, after sending before the mark,
after the mark); another worker then delivers. Every event ends delivered, none lost, every
delivery verified by the receiver; a duplicate carries the same ``webhook-id``; a stopped
worker that wakes (after the sweeper, the deletion path and ``reconcile --fix`` ran far past
every cutoff) marks nothing. The suite runs every point on SQLite and, in turn, one
kind per point on PostgreSQL (``BLOBLEDGER_CRASH_MATRIX=all``: every case on both).

And the events themselves across a crash of their writer: killed before its commit, no
event (the sweeper's roll-forward then writes exactly one); killed after it, exactly one."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores.local import LocalStore
from blobledger.workers.delivery import Delivery
from tests.conftest import database_url
from tests.crash.harness import settle
from tests.crash.pause import process_state
from tests.events import child
from tests.events.conftest import all_events, event_rows
from tests.events.receiver import Receiver, receiving
from tests.support.forkserver import forkserver_context

POINTS = ["events.after_claim", "events.after_send", "events.after_mark", "events.before_log"]
FULL = os.environ.get("BLOBLEDGER_CRASH_MATRIX") == "all"
CASES = [(point, action, db) for db in ("sqlite", "postgresql")
         for i, point in enumerate(POINTS) for action in ("kill", "stop")
         if FULL or db == "sqlite" or action == ("kill", "stop")[i % 2]]


_CONTEXT = forkserver_context("tests.events.child")
TIMEOUT = 60.0
#: the resolvers' clock while a stopped worker sleeps: past every lease, deadline and grace
PAST_EVERY_CUTOFF = 3600.0


def start(target: Callable[[dict[str, str]], None],
          args: dict[str, str]) -> BaseProcess:
    process = _CONTEXT.Process(target=target, args=(args,), daemon=True)
    process.start()
    return process


async def finished(process: BaseProcess) -> int | None:
    await asyncio.to_thread(process.join, TIMEOUT)
    if process.exitcode is None:
        process.kill()
        await asyncio.to_thread(process.join, 10)
    return process.exitcode


async def stopped(process: BaseProcess) -> None:
    assert process.pid is not None
    deadline = time.monotonic() + TIMEOUT
    while process_state(process.pid) != "T":
        assert process.exitcode is None and time.monotonic() < deadline, process.exitcode
        await asyncio.sleep(0.005)


def ledger_on(url: str, store: Path, receiver: Receiver, offset: float = 0.0) -> Ledger:
    local = LocalStore(store)
    settings = Settings(database_url=url, store_url=local.url, webhook_urls=(receiver.url,),
                        webhook_secret=receiver.secret, event_lease=10.0, event_timeout=5.0,
                        upload_deadline=60, sweep_after=180)
    return Ledger(Database(url), local, settings, clock_offset=offset)


@pytest.mark.parametrize(("point", "action", "db"), CASES)
async def test_delivery_survives_a_kill_or_a_pause(point: str, action: str, db: str,
                                                   tmp_path: Path,
                                                   request: pytest.FixtureRequest) -> None:
    pg = request.getfixturevalue("pg_url") if db == "postgresql" else None
    url = await database_url(db, tmp_path, pg)
    with receiving() as receiver:
        async with ledger_on(url, tmp_path / "store", receiver) as ledger:
            one = await ledger.create("one.txt", b"1")
            await ledger.replace(one.id, b"11", expected_version=1)
            two = await ledger.create("two.txt", b"2")
            report = tmp_path / "report.json"
            process = start(child.deliver, {
                "database_url": url, "store": str(tmp_path / "store"), "url": receiver.url,
                "secret": receiver.secret, "failpoints": f"{point}={action}@1",
                "report": str(report)})
            if action == "kill":
                assert await finished(process) == -signal.SIGKILL
            else:
                await stopped(process)
            # another worker, once the claim's lease lapsed
            later = ledger_on(url, tmp_path / "store", receiver, offset=11.0)
            marked = 0  # events marked delivered, by either worker: each exactly once
            async with later:
                for _ in range(3):  # one event per document per claim: the replacement next
                    marked += (await Delivery(later).run_once()).delivered
            if action == "stop":
                async with ledger_on(url, tmp_path / "store", receiver,
                                     offset=PAST_EVERY_CUTOFF) as resolver:
                    await settle(resolver)
                assert process.pid is not None
                os.kill(process.pid, signal.SIGCONT)
                assert await finished(process) == 0
                marked += json.loads(report.read_text())["delivered"]
                assert marked == 3
            found = await all_events(ledger)
        assert [e.state for e in found] == ["delivered"] * 3
        assert all(e.attempts == 1 for e in found), found  # no attempt counted twice
        assert receiver.bad_signatures == 0
        assert set(receiver.counts) == {e.event_id for e in found}  # none lost
        assert receiver.order(one.id) == ["document.ready", "document.replaced"]
        assert receiver.order(two.id) == ["document.ready"]


@pytest.mark.parametrize(("point", "events_after"), [
    ("create.after_tag", 0), ("create.after_commit", 1)])
async def test_a_writer_killed_before_or_after_its_commit(point: str, events_after: int,
                                                          tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    async with ledger_on(url, tmp_path / "store", Receiver()):
        pass  # migrated
    process = start(child.create, {"database_url": url, "store": str(tmp_path / "store"),
                                   "failpoints": f"{point}=kill"})
    assert await finished(process) == -signal.SIGKILL
    with receiving() as receiver:
        async with ledger_on(url, tmp_path / "store", receiver) as ledger:
            assert len(await event_rows(ledger)) == events_after
            from blobledger.workers.sweeper import Sweeper

            ledger.clock_offset = 3600.0  # past every lease and cutoff: the roll-forward
            await Sweeper(ledger).run_once()
            rows = await event_rows(ledger)
            assert [kind for kind, _ in rows] == ["document.ready"]
            assert (await ledger.get(rows[0][1])).name == "crash.txt"
