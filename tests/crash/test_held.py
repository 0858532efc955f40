"""Held documents under kills and pauses: a processing worker SIGKILLed, or stopped
(SIGSTOP) past its lease, at each processing step. Another worker resumes the work; the
document is never readable before its acceptance, is made ready (or rejected) exactly once,
and a paused worker woken afterwards (after the sweeper, the deletion path and
``reconcile --fix`` ran far past every cutoff) decides nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blobledger.errors import NotFound
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import check
from blobledger.workers.processing import ProcessingWorker
from tests.crash.child import Job, Target
from tests.crash.conftest import make_target
from tests.crash.harness import PAST_CUTOFFS, kill_at, settle
from tests.crash.pause import paused
from tests.held.conftest import PDF, PNG

STEPS = ["processing.after_claim", "processing.after_run", "processing.after_verdict"]
#: every step on SQLite and PostgreSQL on disk (a rejection on SQLite), and the step that
#: reads the bytes on one object store: (backend, step, rejected)
KILLS = ([("sqlite-local", step, rejected) for step in STEPS for rejected in (False, True)]
         + [("postgresql-local", step, False) for step in STEPS]
         + [("postgresql-s3", "processing.after_run", False)])
PAUSES = ([(backend, step) for backend in ("sqlite-local", "postgresql-local")
           for step in STEPS] + [("postgresql-s3", "processing.after_run")])
CHECK = {"processors": ("content-type",)}
#: past the processing lease of the killed or paused worker
LEASE_PAST = 700.0
#: while the paused worker sleeps, after the other worker: the resolvers, past every cutoff
MEANWHILE = LEASE_PAST + PAST_CUTOFFS
#: the paused worker wakes later still, and the final resolution after it
WAKE_AT = MEANWHILE + LEASE_PAST


@pytest.fixture
async def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    return await make_target(request.param, tmp_path, request)


async def held(target: Target, data: bytes, settings: dict[str, Any]) -> str:
    async with target.ledger() as ledger:
        ledger.settings = ledger.settings.with_(**settings)
        doc = await ledger.create("held.png", data, content_type="image/png", hold=True)
        assert doc.status == "held"
        return doc.id


async def resume(target: Target, settings: dict[str, Any]) -> Any:
    """Another worker, once the lease of the first has expired."""
    async with target.ledger(clock_offset=LEASE_PAST) as later:
        later.settings = later.settings.with_(**settings)
        return await ProcessingWorker(later).run_once()


async def readable(ledger: Ledger, doc_id: str) -> bool:
    try:
        await ledger.get(doc_id)
    except NotFound:
        return False
    return True


async def settled_and_checked(target: Target, at: float = LEASE_PAST + PAST_CUTOFFS) -> None:
    async with target.ledger(clock_offset=at) as ledger:
        await settle(ledger)
        report = await check(ledger, settled=True)
        assert report.ok, report.violations


@pytest.mark.parametrize(("target", "step", "rejected"), KILLS, indirect=["target"])
async def test_killed_worker_is_resumed(target: Target, step: str, rejected: bool) -> None:
    data = PDF if rejected else PNG
    doc_id = await held(target, data, CHECK)
    await kill_at(Job(target, f"{step}=kill", "process", args={"settings": CHECK}))
    decided = step == "processing.after_verdict"
    async with target.ledger() as ledger:
        assert await readable(ledger, doc_id) is (decided and data is PNG)
        state = await ledger.hold_state(doc_id)
        assert state is not None or (decided and data is PNG)
        if not decided:
            assert state is not None and state.status == "held"
    report = await resume(target, CHECK)
    assert report.claimed == (0 if decided else 1)
    assert report.ready == (1 if data is PNG and not decided else 0)
    assert report.rejected == (1 if data is PDF and not decided else 0)
    async with target.ledger() as ledger:
        assert await readable(ledger, doc_id) is (data is PNG)
        if data is PNG:
            assert (await ledger.get(doc_id)).version == 1
        else:
            state = await ledger.hold_state(doc_id)
            assert state is not None and state.status == "rejected"
    await settled_and_checked(target)


@pytest.mark.parametrize(("target", "step"), PAUSES, indirect=["target"])
async def test_paused_worker_decides_nothing(target: Target, step: str,
                                             tmp_path: Path) -> None:
    """The paused worker's scanner rejects everything, the later one's accepts: the
    document ends ready, and the paused worker, woken, neither rejects nor accepts it."""
    rejecting = {"processors": ("scan",), "scan_command": "false"}
    accepting = {"processors": ("scan",), "scan_command": "true"}
    doc_id = await held(target, PNG, rejecting)
    job = Job(target, f"{step}=stop", "process", args={"settings": rejecting},
              report=str(tmp_path / "report.json"), wake_offset=WAKE_AT)
    async with paused(job) as child:
        decided = step == "processing.after_verdict"
        async with target.ledger() as ledger:
            assert not await readable(ledger, doc_id)
        report = await resume(target, accepting)
        assert report.claimed == (0 if decided else 1)
        async with target.ledger(clock_offset=MEANWHILE) as ledger:
            await settle(ledger)
            assert await readable(ledger, doc_id) is not decided
        outcome = await child.resume()
    processed = outcome.answer["processing"]
    async with target.ledger() as ledger:
        if decided:  # the paused worker had rejected it before it stopped
            assert processed["rejected"] == 1
            assert not await readable(ledger, doc_id)
        else:
            assert processed["rejected"] == 0 and processed["ready"] == 0, processed
            assert processed["lost"] + processed["gone"] == 1, processed
            assert (await ledger.get(doc_id)).version == 1
            assert await ledger.hold_state(doc_id) is None
    await settled_and_checked(target, at=WAKE_AT + PAST_CUTOFFS)
