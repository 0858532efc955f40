"""Prometheus metrics for the workers: what each sweep and reconcile found and did.

Everything is registered in the default registry, which the service exports on ``/metrics``.
Counters accumulate over the process's life; ``*_last_*`` gauges describe the latest run.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from prometheus_client import Counter, Gauge


class SweepReport(Protocol):
    """What :func:`record_sweep` reads of a sweep's report (the sweeper's ``SweepReport``);
    the counts per outcome in :data:`SWEEP_OUTCOMES` are attributes too."""

    @property
    def refused(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    def as_dict(self) -> dict[str, Any]: ...


class ReconcileReport(Protocol):
    """What :func:`record_reconcile` reads of a reconcile's report."""

    @property
    def fixed(self) -> int: ...
    @property
    def seconds(self) -> float: ...
    @property
    def blobs(self) -> int: ...
    def count(self, category: str) -> int: ...
    def as_dict(self) -> dict[str, Any]: ...

SWEEP_OUTCOMES = ("swept", "rolled_forward", "moved_to_deleting", "fenced", "deleted", "absent",
                  "late", "refused", "errors", "retagged")
RECONCILE_CATEGORIES = ("orphan", "missing", "missing_ready", "mismatch", "uncommitted")

SWEEP_RUNS = Counter("blobledger_sweep_runs", "Sweeper runs completed")
SWEEP_FAILURES = Counter("blobledger_sweep_failures", "Sweeper runs that failed as a whole")
SWEEP_ROWS = Counter("blobledger_sweep_rows", "Rows handled by the sweeper, by outcome",
                     ["outcome"])
SWEEP_REFUSED = Counter("blobledger_guard_refusals",
                        "Deletes or tag changes refused by the guard (never an error)")
SWEEP_LAST_RUN = Gauge("blobledger_sweep_last_run_timestamp_seconds",
                       "When the latest sweep ended (Unix time)")
SWEEP_LAST_SECONDS = Gauge("blobledger_sweep_last_duration_seconds",
                           "How long the latest sweep took")
SWEEP_LAST = Gauge("blobledger_sweep_last_rows", "Rows per outcome in the latest sweep",
                   ["outcome"])

RETAGGED = Counter("blobledger_retagged",
                   "Owed retags done by the retag worker (the deferred retag)")
RETAG_LAG = Gauge("blobledger_retag_lag_seconds",
                  "Age of the oldest retag still owed (0: none); beyond "
                  "BLOBLEDGER_RETAG_WARN_AFTER, check and doctor warn")

DOCUMENTS_CREATED = Counter("blobledger_documents_created",
                            "Documents made ready by a create (any route)")
HTTP_ERRORS = Counter("blobledger_http_errors", "Responses with a 5xx status, by status",
                      ["status"])

RECONCILE_RUNS = Counter("blobledger_reconcile_runs", "Reconciler runs completed")
RECONCILE_FINDINGS = Gauge("blobledger_reconcile_findings",
                           "Findings per category in the latest reconcile", ["category"])
RECONCILE_FIXED = Counter("blobledger_reconcile_fixed", "Orphans deleted by reconcile --fix")
RECONCILE_LAST_RUN = Gauge("blobledger_reconcile_last_run_timestamp_seconds",
                           "When the latest reconcile ended (Unix time)")
RECONCILE_LAST_SECONDS = Gauge("blobledger_reconcile_last_duration_seconds",
                               "How long the latest reconcile took")
RECONCILE_BLOBS = Gauge("blobledger_reconcile_last_blobs", "Blobs listed by the latest reconcile")


#: the latest sweep and reconcile of this process: ``{"sweep": {"at": <unix>, ...}}``
_LAST: dict[str, dict[str, Any]] = {}


def last_reports() -> dict[str, dict[str, Any] | None]:
    """The latest sweep and reconcile summaries of this process (None: none ran yet)."""
    return {kind: (dict(_LAST[kind]) if kind in _LAST else None)
            for kind in ("sweep", "reconcile")}


def record_sweep(report: SweepReport) -> None:
    """Add one sweep's counts to the metrics."""
    _LAST["sweep"] = {"at": time.time(), **report.as_dict()}
    SWEEP_RUNS.inc()
    for outcome in SWEEP_OUTCOMES:
        value = int(getattr(report, outcome))
        SWEEP_ROWS.labels(outcome).inc(value)
        SWEEP_LAST.labels(outcome).set(value)
    SWEEP_REFUSED.inc(report.refused)
    SWEEP_LAST_RUN.set(time.time())
    SWEEP_LAST_SECONDS.set(report.seconds)


def record_reconcile(report: ReconcileReport) -> None:
    """Publish one reconcile's findings."""
    _LAST["reconcile"] = {"at": time.time(), **report.as_dict()}
    RECONCILE_RUNS.inc()
    for category in RECONCILE_CATEGORIES:
        RECONCILE_FINDINGS.labels(category).set(report.count(category))
    RECONCILE_FIXED.inc(report.fixed)
    RECONCILE_LAST_RUN.set(time.time())
    RECONCILE_LAST_SECONDS.set(report.seconds)
    RECONCILE_BLOBS.set(report.blobs)
