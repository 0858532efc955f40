"""Attachments under a real SIGKILL, on the four backend combinations: killed at every step
of staging, killed with the application's transaction open after A4, killed right after its
commit; and killed at every step of a client's direct attachment upload (SQLite + local,
PostgreSQL + Azurite, PostgreSQL + S3) and tus attachment upload (SQLite + local, PostgreSQL +
Azurite), and around the application's commit of such an upload. Then the sweeper, the
deletion path and the reconciler run with the clock past every cutoff, and the settled
invariants must hold: a staged blob that was never attached is gone (never rolled forward),
an attached one is intact and readable."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from sqlalchemy import select

from blobledger.protocol.models import BlobRow
from blobledger.workers.invariants import InvariantReport
from tests.attachments.child import StageJob, main
from tests.attachments.conftest import app_engine
from tests.crash.child import Target, payload, sha256
from tests.crash.conftest import make_target
from tests.crash.harness import Resolution, resolve, settle
from tests.support.forkserver import forkserver_context

_CONTEXT = forkserver_context("tests.attachments.child")

STAGE_POINTS = ["stage.after_insert", "put.mid_stream@2", "put.before_commit",
                "stage.after_upload", "stage.after_confirm", "stage.after_tag"]
#: a client's attachment uploads: its steps, then the completion's (A3, never C4)
UPLOAD_POINTS = {
    "direct": ["direct.after_create", "direct.after_upload",
               "direct.stage.after_verify", "direct.stage.after_confirm",
               "direct.stage.after_tag", "direct.stage.after_finish"],
    "tus": ["tus.after_create", "tus.after_part@2", "tus.after_publish",
            "tus.stage.after_verify", "tus.stage.after_confirm", "tus.stage.after_tag",
            "tus.stage.after_finish"],
}
UPLOAD_BACKENDS = {"direct": ["sqlite-local", "postgresql-azure", "postgresql-s3"],
                   "tus": ["sqlite-local", "postgresql-azure"]}
UPLOAD_CASES = [pytest.param(via, point, backend, id=f"{via}-{point}-{backend}")
                for via, points in UPLOAD_POINTS.items() for point in points
                for backend in UPLOAD_BACKENDS[via]]


async def killed(job: StageJob) -> None:
    process = _CONTEXT.Process(target=main, args=(job,), daemon=True)
    process.start()
    await asyncio.to_thread(process.join, 60)
    if process.exitcode is None:
        process.kill()
        raise AssertionError(f"child under {job.failpoints or job.then} hung")
    assert process.exitcode == -signal.SIGKILL, (job, process.exitcode)


def settled_ok(resolution: Resolution) -> InvariantReport:
    report = resolution.report
    assert report is not None
    assert report.ok, report.render()
    return report


async def rows(target: Target) -> dict[str, str]:
    async with target.ledger() as ledger, ledger.db.session() as session:
        found = (await session.execute(select(BlobRow.name, BlobRow.state))).all()
    return {name: state for name, state in found}


@pytest.fixture
async def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    made = await make_target(backend, tmp_path, request)
    app_engine(made.database_url).dispose()
    return made


@pytest.mark.parametrize("point", STAGE_POINTS)
async def test_killed_while_staging(target: Target, point: str) -> None:
    name, _, nth = point.partition("@")
    await killed(StageJob(target, f"{name}=kill" + (f"@{nth}" if nth else ""), "nothing"))
    assert set((await rows(target)).values()) <= {"pending"}
    settled_ok(await resolve(target, settle))
    assert await rows(target) == {}


@pytest.mark.parametrize("then", ["staged", "flush"])
async def test_killed_between_stage_and_commit(target: Target, then: str) -> None:
    await killed(StageJob(target, "", then))
    assert set((await rows(target)).values()) == {"pending"}  # A4 died with its transaction
    settled_ok(await resolve(target, settle))
    assert await rows(target) == {}  # never rolled forward


async def test_killed_after_the_application_commit(target: Target) -> None:
    await killed(StageJob(target, "", "commit", seed=7))
    (name, state), = (await rows(target)).items()
    assert state == "attached"
    assert settled_ok(await resolve(target, settle)).attached == 1
    async with target.ledger() as ledger:
        data = b"".join([c async for c in ledger.read_attachment(name)])
    assert sha256(data) == sha256(payload(7))


@pytest.mark.parametrize(("via", "point", "backend"), UPLOAD_CASES)
async def test_killed_during_an_attachment_upload(target: Target, via: str, point: str) -> None:
    name, _, nth = point.partition("@")
    await killed(StageJob(target, f"{name}=kill" + (f"@{nth}" if nth else ""), "nothing",
                          via=via))
    assert set((await rows(target)).values()) <= {"pending"}  # staged at most, never more
    settled_ok(await resolve(target, settle))
    assert await rows(target) == {}  # an upload nobody attached is swept, never rolled on


@pytest.mark.parametrize("then", ["flush", "commit"])
@pytest.mark.parametrize(("via", "backend"), [
    ("direct", "sqlite-local"), ("direct", "postgresql-s3"), ("tus", "postgresql-azure")])
async def test_killed_around_the_commit_of_an_uploaded_attachment(
        target: Target, via: str, then: str) -> None:
    await killed(StageJob(target, "", then, seed=11, via=via))
    (name, state), = (await rows(target)).items()
    assert state == ("attached" if then == "commit" else "pending")
    report = settled_ok(await resolve(target, settle))
    if then == "flush":  # A4 died with the application's transaction: swept
        assert await rows(target) == {}
        return
    assert report.attached == 1
    async with target.ledger() as ledger:
        data = b"".join([c async for c in ledger.read_attachment(name)])
    assert sha256(data) == sha256(payload(11))
