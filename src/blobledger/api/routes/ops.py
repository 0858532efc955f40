"""``/ops/...``: what an operator looks at (the web page's operations view reads these).

- ``GET /ops/whoami``: whether tokens are configured and the scopes of the presented one;
- ``GET /ops/overview``: pending intents by age, rows in ``deleting``, the oldest of each,
  and the latest sweep and reconcile summaries of this process. The oldest rows name their
  blob and document only for a caller that may write: a read token sees what
  ``GET /documents`` shows it, and that never lists a pending or deleting row, so it gets
  their counts, kinds, sizes and ages without a name or an id;
- ``GET /ops/metrics``: the Prometheus counters the page charts, sampled over time;
- ``GET /ops/workers``: each background worker's state (up, restarts, last completed run,
  last error, and why ``/readyz`` refuses, if it does);
- ``POST /ops/check``: the invariant check (:func:`blobledger.workers.invariants.check`), read-only;
- ``POST /ops/reconcile``: a report-only reconcile (never ``--fix``), read-only;
- ``POST /ops/doctor``: the store doctor's table. It writes and deletes probe blobs, so it
  needs the ``write`` scope; the others need ``read``.

Check, reconcile and doctor run one at a time per process (409 ``busy`` otherwise).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import REGISTRY
from sqlalchemy import func, select

from blobledger._base import metrics
from blobledger.api.auth import _bearer, require, scopes_of, scopes_presented
from blobledger.api.openapi import problems
from blobledger.api.problems import Problem
from blobledger.api.routes import ledger_of, settings_of
from blobledger.protocol import events
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow
from blobledger.workers.doctor import run_doctor
from blobledger.workers.invariants import check
from blobledger.workers.reconciler import reconcile
from blobledger.workers.supervisor import WorkerState

router = APIRouter(prefix="/ops", tags=["operations"])

T = TypeVar("T")

#: age buckets of pending intents: (label, upper bound in seconds)
AGE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1 min", 60), ("1-10 min", 600), ("10-60 min", 3600), ("1-2 h", 7200),
    ("2-24 h", 86400), ("> 1 day", float("inf")),
)
#: the counters charted, each the sum of these (sample name, labels) pairs
SERIES: dict[str, tuple[tuple[str, Mapping[str, str]], ...]] = {
    "creates": (("blobledger_documents_created_total", {}),),
    "sweeps": (("blobledger_sweep_runs_total", {}),),
    "guard_refusals": (("blobledger_guard_refusals_total", {}),),
    # plus every 5xx response (blobledger_http_errors_total, any status)
    "errors": (("blobledger_sweep_failures_total", {}),
               ("blobledger_sweep_rows_total", {"outcome": "errors"})),
}
HISTORY_POINTS = 360
MIN_SAMPLE_GAP = 1.0


class MetricsHistory:
    """The charted counters, sampled at most once a second (``HISTORY_POINTS`` kept)."""

    def __init__(self) -> None:
        self.points: deque[dict[str, float]] = deque(maxlen=HISTORY_POINTS)

    def sample(self) -> None:
        now = time.time()
        if self.points and now - self.points[-1]["t"] < MIN_SAMPLE_GAP:
            return
        point = {"t": round(now, 3)}
        for series, samples in SERIES.items():
            point[series] = sum(REGISTRY.get_sample_value(name, dict(labels)) or 0.0
                                for name, labels in samples)
        point["errors"] += _http_errors()
        self.points.append(point)


def _http_errors() -> float:
    total = 0.0
    for family in metrics.HTTP_ERRORS.collect():
        total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


def history_of(request: Request) -> MetricsHistory:
    history = getattr(request.app.state, "metrics_history", None)
    if not isinstance(history, MetricsHistory):
        history = MetricsHistory()
        request.app.state.metrics_history = history
    return history


async def sample_metrics(history: MetricsHistory, interval: float = 10.0) -> None:
    """Sample the charted counters every ``interval`` seconds (a task of the app)."""
    while True:
        history.sample()
        await asyncio.sleep(interval)


async def _exclusive(request: Request, what: str, run: Callable[[], Awaitable[T]]) -> T:
    lock = getattr(request.app.state, "ops_lock", None)
    if not isinstance(lock, asyncio.Lock):
        lock = request.app.state.ops_lock = asyncio.Lock()
    if lock.locked():
        raise Problem(409, "busy", f"a check, reconcile or doctor run is in progress; {what} "
                      "again when it ends", headers={"Retry-After": "5"})
    async with lock:
        return await run()


@router.get("/whoami", dependencies=[Depends(require("read"))])
async def whoami(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
) -> dict[str, Any]:
    """Whether tokens are configured, and the scopes the presented token holds."""
    tokens: Mapping[str, frozenset[str]] = settings_of(request).api_tokens
    if not tokens:
        return {"tokens": False, "scopes": ["admin", "read", "write"]}
    scopes = scopes_of(tokens, credentials.credentials) if credentials else None
    return {"tokens": True, "scopes": sorted(scopes or ())}


def _age(now: datetime, then: datetime) -> float:
    return round(max((now - then).total_seconds(), 0.0), 1)


#: the fields of an overview row that name a blob or a document
NAMING = ("blob", "document_id", "document_name")


async def _rows(request: Request, state: BlobState, limit: int,
                named: bool) -> list[dict[str, Any]]:
    """The oldest rows in ``state``; without ``named``, their names and ids are None."""
    ledger = ledger_of(request)
    now = await ledger.now()
    moment = BlobRow.created_at if state == BlobState.PENDING else BlobRow.changed_at
    query = (select(BlobRow, DocumentRow.name)
             .outerjoin(DocumentRow, DocumentRow.id == BlobRow.document_id)
             .where(BlobRow.state == state.value).order_by(moment).limit(limit))
    async with ledger.db.session() as session:
        rows = (await session.execute(query)).all()
    found = [{"blob": blob.name, "document_id": blob.document_id, "document_name": name,
              "kind": blob.kind, "size": blob.size, "age_seconds": _age(now, (
                  blob.created_at if state == BlobState.PENDING else blob.changed_at)),
              "lease_expired": blob.lease_until < now}
             for blob, name in rows]
    if not named:
        for row in found:
            row.update(dict.fromkeys(NAMING))
    return found


async def _event_queue(ledger: Any) -> dict[str, Any]:
    """Events by delivery state, and how long the oldest pending one has waited."""
    async with ledger.db.transaction(readonly=True) as conn:
        counts = await events.counts(conn)
        lag = await events.oldest_pending(conn, ledger.clock_offset)
    return {**counts, "lag_seconds": lag}


@router.get("/overview", dependencies=[Depends(require("read"))],
            responses=problems(503))
async def overview(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> dict[str, Any]:
    """Pending intents by age, rows in ``deleting``, the latest sweep, reconcile and event
    delivery, the events by delivery state (names and ids of the oldest rows for a caller
    that may write only)."""
    named = "write" in scopes_presented(request)
    ledger = ledger_of(request)
    settings = settings_of(request)
    now = await ledger.now()
    async with ledger.db.session() as session:
        created = (await session.execute(select(BlobRow.created_at).where(
            BlobRow.state == BlobState.PENDING.value))).scalars().all()
        deleting = (await session.execute(select(func.count()).select_from(BlobRow).where(
            BlobRow.state == BlobState.DELETING.value))).scalar_one()
    buckets = {label: 0 for label, _ in AGE_BUCKETS}
    for at in created:
        age = _age(now, at)
        label = next(label for label, bound in AGE_BUCKETS if age < bound)
        buckets[label] += 1
    return {
        "now": now.isoformat() + "Z",
        "pending": {"count": len(created),
                    "by_age": [{"age": k, "count": v} for k, v in buckets.items()],
                    "oldest": await _rows(request, BlobState.PENDING, limit, named)},
        "deleting": {"count": int(deleting),
                     "oldest": await _rows(request, BlobState.DELETING, limit, named)},
        **metrics.last_reports(),
        "event_queue": await _event_queue(ledger),
        "workers": _workers(request),
        "settings": {"upload_deadline": settings.upload_deadline,
                     "sweep_after": settings.sweep_after,
                     "delete_grace": settings.delete_grace},
    }


def _workers(request: Request) -> list[dict[str, Any]]:
    states: dict[str, WorkerState] = getattr(request.app.state, "workers", {})
    now = time.time()
    return [state.to_json(now) for state in states.values()]


@router.get("/workers", dependencies=[Depends(require("read"))])
async def workers(request: Request) -> dict[str, Any]:
    """Each background worker of this process: ``up``, ``restarts``, ``last_success`` (Unix
    time), ``last_error``, ``state`` (running, restarting or stalled) and ``problem``."""
    return {"workers": _workers(request)}


@router.get("/metrics", dependencies=[Depends(require("read"))])
async def metrics_history(request: Request) -> dict[str, Any]:
    """The charted counters over time: ``{"series": [...], "points": [{"t": ...}, ...]}``."""
    history = history_of(request)
    history.sample()
    return {"series": list(SERIES), "points": list(history.points)}


@router.post("/check", dependencies=[Depends(require("read"))],
             responses=problems(409, 503))
async def run_check(
    request: Request, settled: Annotated[bool, Query()] = False,
) -> dict[str, Any]:
    """The invariant check (``blobledger check``); it changes nothing."""
    ledger = ledger_of(request)
    report = await _exclusive(request, "check", lambda: check(ledger, settled=settled))
    return report.to_json()


@router.post("/reconcile", dependencies=[Depends(require("read"))],
             responses=problems(409, 502, 503))
async def run_reconcile(request: Request) -> dict[str, Any]:
    """A report-only reconcile (no fix, no block lists); it changes nothing."""
    ledger = ledger_of(request)
    older_than = max(ledger.settings.sweep_after, ledger.settings.upload_deadline)
    report = await _exclusive(request, "reconcile", lambda: reconcile(
        ledger, fix=False, older_than=older_than, blocks=False))
    return {**report.as_dict(), "findings": [f.as_dict() for f in report.findings[:50]]}


@router.post("/doctor", dependencies=[Depends(require("write"))],
             responses=problems(409, 503))
async def run_store_doctor(request: Request) -> dict[str, Any]:
    """The store doctor's table (``blobledger doctor``); writes and deletes probe blobs."""
    settings = settings_of(request)
    report = await _exclusive(request, "doctor", lambda: run_doctor(settings))
    return report.to_json()
