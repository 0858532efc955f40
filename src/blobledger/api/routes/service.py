"""Liveness, readiness and Prometheus metrics (the default registry)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blobledger.api.problems import PROBLEM_RESPONSE, Problem
from blobledger.api.routes import ledger_of
from blobledger.errors import BlobLedgerError

router = APIRouter(tags=["service"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: PROBLEM_RESPONSE})
async def readyz(request: Request) -> dict[str, str]:
    """The database and the store are both reachable."""
    ledger = ledger_of(request)
    for what, ping in (("database", ledger.db.ping), ("store", ledger.store.ping)):
        try:
            await ping()
        except (BlobLedgerError, OSError, TimeoutError) as exc:
            raise Problem(503, "not-ready", f"the {what} is not reachable: {exc}"[:300],
                          headers={"Retry-After": "5"}) from None
    return {"status": "ready"}


@router.get("/metrics", response_class=Response,
            responses={200: {"content": {"text/plain": {}}}})
async def metrics() -> Response:
    """Prometheus metrics of the default registry."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
