"""Each background worker of ``serve``, killed by an injected exception (a failpoint's
``raise``, an error no worker loop catches), in the running app: the failure is logged at
once with its traceback, the worker restarted with backoff and counted on ``/metrics``,
``/readyz`` answers 503 naming it while it cannot complete a run, ``/ops/workers`` shows
it, and once the fault is gone the worker completes its runs and the service is ready
again. For the delivery worker, ``doctor`` warns meanwhile that the oldest pending event
waits longer than its interval allows. A run that fails on an outage (the database away)
is logged by the worker itself, which goes on: no restart."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError

from blobledger import Ledger, failpoints
from blobledger.api import create_app
from blobledger.cli.serve import background_workers
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores import open_store
from blobledger.workers import delivery
from blobledger.workers.doctor import run_doctor
from blobledger.workers.doctor.checks import PASS, WARN
from blobledger.workers.doctor.delivery import DELIVERY_LAG
from tests.conftest import database_url
from tests.events.receiver import receiving
from tests.sweeper.support import seed_intent

#: how each worker is turned on, the fault that kills it, and the work that reaches it
CASES: dict[str, tuple[dict[str, object], str]] = {
    "sweeper": ({"sweep_interval": 0.05}, "sweep.after_claim"),
    "deletion": ({"sweep_interval": 0.05}, "deletion.after_claim"),
    "retagger": ({"retag": "deferred", "retag_interval": 0.05}, "retag.after_claim"),
    "processing": ({"processors": ("content-type",), "processing_interval": 0.05},
                   "processing.after_claim"),
    "delivery": ({"event_interval": 0.05, "event_lease": 1.0, "event_timeout": 0.5},
                 "events.after_claim"),  # with a receiver (see service)
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
                  request: pytest.FixtureRequest
                  ) -> AsyncIterator[tuple[httpx.AsyncClient, Settings]]:
    turned_on, _ = CASES[case]  # serve's default sweeper only where the case turns it on
    db_kind = backend.split("-")[0]
    pg = request.getfixturevalue("pg_url") if db_kind == "postgresql" else None
    url = await database_url(db_kind, tmp_path, pg)
    with ExitStack() as stack:
        if case == "delivery":  # a receiver that takes every event
            receiver = stack.enter_context(receiving())
            turned_on = {**turned_on, "webhook_urls": (receiver.url,),
                         "webhook_secret": receiver.secret}
        settings = Settings(database_url=url, store_url=f"file://{tmp_path / 'store'}",
                            upload_deadline=60, sweep_after=180, delete_grace=0,
                            worker_grace=0.3, **{"sweep_interval": 0, **turned_on})
        async with _serving(case, url, settings) as client:
            yield client, settings


@asynccontextmanager
async def _serving(case: str, url: str, settings: Settings
                   ) -> AsyncIterator[httpx.AsyncClient]:
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


async def delivery_row(settings: Settings) -> tuple[str, str]:
    """What ``doctor`` says of event delivery: its status and detail."""
    report = await run_doctor(settings, create=False)
    (row,) = [c for c in report.checks if c.name == DELIVERY_LAG]
    assert not report.failed, report.render()  # a warning, never a failed must-have
    return row.status, row.detail


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
async def test_a_delivery_run_failed_on_an_outage_is_logged_and_the_worker_goes_on(
        backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING)
    run_once, failed = delivery.Delivery.run_once, list[bool]()

    async def database_away_once(self: delivery.Delivery) -> delivery.DeliveryReport:
        if not failed:
            failed.append(True)
            raise OperationalError("SELECT 1", {}, ConnectionRefusedError("database away"))
        return await run_once(self)

    monkeypatch.setattr(delivery.Delivery, "run_once", database_away_once)
    async with service("delivery", backend, tmp_path, request) as (client, _):
        async def logged() -> bool:
            return any(r.getMessage().startswith("event delivery failed: OperationalError")
                       for r in caplog.records)

        await eventually(logged, "the failed run logged")

        async def ran() -> bool:
            states = (await client.get("/ops/workers")).json()["workers"]
            return any(w["name"] == "delivery" and w["last_success"] for w in states)

        await eventually(ran, "a completed run after the failure")
        (shown,) = (await client.get("/ops/workers")).json()["workers"]
        assert shown["state"] == "running" and shown["restarts"] == 0
        assert (await client.get("/readyz")).status_code == 200


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
@pytest.mark.parametrize("case", list(CASES))
async def test_a_failing_worker_is_logged_restarted_counted_and_named(
        case: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest,
        caplog: pytest.LogCaptureFixture) -> None:
    name = WORKER.get(case, case)
    restarts = REGISTRY.get_sample_value("blobledger_worker_restarts_total",
                                         {"worker": name}) or 0.0
    caplog.set_level(logging.WARNING)
    failpoints.configure(f"{CASES[case][1]}=raise")
    try:
        async with service(case, backend, tmp_path, request) as (client, settings):
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
            if case == "delivery":  # the event it claims and never sends waits too long
                status, detail = await delivery_row(settings)
                assert status == WARN and "delivery worker is down" in detail, detail

            failpoints.configure("")  # the fault is gone: the worker runs again

            async def ready() -> bool:
                return (await client.get("/readyz")).status_code == 200

            await eventually(ready, "/readyz 200 again")
            text = (await client.get("/metrics")).text
            assert metric(text, "blobledger_worker_up", name) == 1
            assert metric(text, "blobledger_worker_last_success_timestamp_seconds",
                          name) > 0
            if case == "delivery":  # the event delivered: nothing waits
                async def delivered() -> bool:
                    return await delivery_row(settings) == (PASS, "no event waiting")

                await eventually(delivered, "doctor: no event waiting")
    finally:
        failpoints.configure("")
