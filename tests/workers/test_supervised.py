"""Each background worker of ``serve``, killed by an injected exception (a failpoint's
``raise``, an error no worker loop catches), in the running app: the failure is logged at
once with its traceback, the worker restarted with backoff and counted on ``/metrics``,
``/readyz`` answers 503 naming it while it cannot complete a run, ``/ops/workers`` shows
it, and once the fault is gone the worker completes its runs and the service is ready
again. The delivery worker logs a failing run itself and goes on: it is not restarted, but
shows as stalled the same way."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY

from blobledger import Ledger, failpoints
from blobledger.api import create_app
from blobledger.cli.serve import background_workers
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores import open_store
from tests.conftest import database_url
from tests.sweeper.support import seed_intent

WEBHOOK_SECRET = "whsec_" + "A" * 44
#: how each worker is turned on, the fault that kills it, and the work that reaches it
CASES: dict[str, tuple[dict[str, object], str]] = {
    "sweeper": ({"sweep_interval": 0.05}, "sweep.after_claim"),
    "deletion": ({"sweep_interval": 0.05}, "deletion.after_claim"),
    "retagger": ({"retag": "deferred", "retag_interval": 0.05}, "retag.after_claim"),
    "processing": ({"processors": ("content-type",), "processing_interval": 0.05},
                   "processing.after_claim"),
    "delivery": ({"webhook_urls": ("http://127.0.0.1:9/hook",),
                  "webhook_secret": WEBHOOK_SECRET, "event_interval": 0.05},
                 "events.after_claim"),
}
WORKER = {"deletion": "sweeper"}


async def eventually(condition: Callable[[], Awaitable[bool]], what: str,
                     limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not await condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.05)


def metric(text: str, name: str, worker: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{name}{{worker="{worker}"}} '):
            return float(line.split()[-1])
    raise AssertionError(f"{name} of {worker} not exported")


async def make_work(case: str, ledger: Ledger) -> None:
    """Leave what the worker claims: a stale intent, a released blob, an owed retag, a
    held document, an event."""
    if case == "sweeper":  # an intent whose writer died an hour ago
        await seed_intent(ledger, tag="pending")
        return
    doc = await ledger.create("w.txt", b"hello", content_type="text/plain",
                              hold=case == "processing")
    if case == "deletion":
        await ledger.delete(doc.id)


@asynccontextmanager
async def service(case: str, backend: str, tmp_path: Path,
                  request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    turned_on, _ = CASES[case]
    db_kind = backend.split("-")[0]
    pg = request.getfixturevalue("pg_url") if db_kind == "postgresql" else None
    url = await database_url(db_kind, tmp_path, pg)
    settings = Settings(database_url=url, store_url=f"file://{tmp_path / 'store'}",
                        upload_deadline=60, sweep_after=180, delete_grace=0,
                        worker_grace=0.3, **turned_on)
    writer = Ledger(Database(url), open_store(settings.store_url, settings), settings)
    await writer.connect()
    try:
        await make_work(case, writer)
    finally:
        await writer.close()
    async with Ledger(Database(url), open_store(settings.store_url, settings),
                      settings) as ledger:
        app = create_app(ledger, settings, workers=background_workers(settings))
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            yield client


SURVIVES = "delivery"  # its loop logs a failed run and goes on (the event is retried)


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
async def test_a_failed_delivery_run_is_logged_and_the_worker_goes_on(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    failpoints.configure(f"{CASES[SURVIVES][1]}=raise@1")
    try:
        async with service(SURVIVES, backend, tmp_path, request) as client:
            async def logged() -> bool:
                return any(r.getMessage().startswith("event delivery failed")
                           and r.exc_info is not None for r in caplog.records)

            await eventually(logged, "the failed run logged with its traceback")

            async def ran() -> bool:
                states = (await client.get("/ops/workers")).json()["workers"]
                return any(w["name"] == SURVIVES and w["last_success"] for w in states)

            await eventually(ran, "a completed run after the failure")
            (shown,) = (await client.get("/ops/workers")).json()["workers"]
            assert shown["state"] == "running" and shown["restarts"] == 0
            assert (await client.get("/readyz")).status_code == 200
    finally:
        failpoints.configure("")


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
@pytest.mark.parametrize("case", [case for case in CASES if case != SURVIVES])
async def test_a_failing_worker_is_logged_restarted_counted_and_named(
        case: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture) -> None:
    name = WORKER.get(case, case)
    restarts = REGISTRY.get_sample_value("blobledger_worker_restarts_total",
                                         {"worker": name}) or 0.0
    caplog.set_level(logging.WARNING)
    failpoints.configure(f"{CASES[case][1]}=raise")
    try:
        async with service(case, backend, tmp_path, request) as client:
            async def not_ready() -> bool:  # down longer than its interval allows
                answer = await client.get("/readyz")
                states = (await client.get("/ops/workers")).json()["workers"]
                return (answer.status_code == 503 and name in answer.json()["detail"]
                        and any(w["name"] == name and "FailpointError" in (w["problem"] or "")
                                for w in states))

            await eventually(not_ready, f"/readyz 503 naming {name}")
            text = (await client.get("/metrics")).text
            async def restarted() -> bool:
                states = (await client.get("/ops/workers")).json()["workers"]
                return any(w["name"] == name and w["restarts"] >= 1 for w in states)

            await eventually(restarted, f"{name} restarted")
            text = (await client.get("/metrics")).text
            assert metric(text, "blobledger_worker_restarts_total", name) > restarts
            failed = [r for r in caplog.records
                      if r.getMessage().startswith(f"background worker {name} failed")]
            assert failed and failed[0].exc_info is not None  # the traceback, at once

            failpoints.configure("")  # the fault is gone: the worker runs again

            async def ready() -> bool:
                return (await client.get("/readyz")).status_code == 200

            await eventually(ready, "/readyz 200 again")
            text = (await client.get("/metrics")).text
            assert metric(text, "blobledger_worker_up", name) == 1
            assert metric(text, "blobledger_worker_last_success_timestamp_seconds",
                          name) > 0
    finally:
        failpoints.configure("")
