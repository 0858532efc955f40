"""Liveness, readiness and Prometheus metrics (the default registry)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blobledger.api.openapi import json_body, problems
from blobledger.api.problems import Problem
from blobledger.api.routes import ledger_of
from blobledger.errors import BlobLedgerError
from blobledger.workers import supervisor

router = APIRouter(tags=["service"])
log = logging.getLogger("blobledger.api")


STATUS = {"type": "object", "required": ["status"],
          "properties": {"status": {"type": "string"}}}


@router.get("/healthz", responses={200: json_body("The process answers.", STATUS)})
@router.head("/healthz", include_in_schema=False)
async def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={200: json_body("Ready.", STATUS), **problems(503)})
@router.head("/readyz", include_in_schema=False)
async def readyz(request: Request) -> dict[str, str]:
    """The database and the store are both reachable, and every background worker runs
    and completes its runs (none down, or without a completed run, for longer than twice
    its interval plus ``BLOBLEDGER_WORKER_GRACE``). The answer says which is not, never
    where it is: the reason (which may name hosts, users or folders) goes to the log."""
    ledger = ledger_of(request)
    for what, ping in (("database", ledger.db.ping), ("store", ledger.store.ping)):
        try:
            await ping()
        except (BlobLedgerError, OSError, TimeoutError) as exc:
            log.warning("not ready: the %s is not reachable: %s", what,
                        (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])
            raise Problem(503, "not-ready", f"the {what} is not reachable",
                          headers={"Retry-After": "5"}) from None
    stalled = supervisor.problems(getattr(request.app.state, "workers", {}))
    if stalled:
        for line in stalled.values():
            log.warning("not ready: %s", line)
        raise Problem(503, "not-ready", f"background worker {', '.join(stalled)} is not "
                      "completing its runs (see /ops/workers and the log)",
                      headers={"Retry-After": "5"})
    return {"status": "ready"}


@router.get("/metrics", response_class=Response,
            responses={200: {"description": "The Prometheus text format.",
                             "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics() -> Response:
    """Prometheus metrics of the default registry."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
