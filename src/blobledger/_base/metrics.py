"""Prometheus metrics for the workers: what each sweep and reconcile found and did.

Everything is registered in the default registry, which the service exports on ``/metrics``.
Counters accumulate over the process's life; ``*_last_*`` gauges describe the latest run.
prometheus-client comes with the ``serve`` extra: in a process without it (the core install:
the library, Django, the CLI's workers) the metrics count nothing, and nothing exports them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from prometheus_client import Counter, Gauge
else:
    try:
        from prometheus_client import Counter, Gauge
    except ModuleNotFoundError:  # the core install: metrics nobody reads
        from blobledger._base._no_metrics import Counter, Gauge


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
    """The latest sweep, reconcile, event delivery and processing summaries of this process
    (None: none ran yet)."""
    return {kind: (dict(_LAST[kind]) if kind in _LAST else None)
            for kind in ("sweep", "reconcile", "events", "processing")}


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


EVENTS_DELIVERED = Counter("blobledger_events_delivered",
                           "Events delivered to every target (marked delivered)")
EVENTS_FAILURES = Counter("blobledger_event_delivery_failures",
                          "Failed delivery attempts (one per target that refused or failed)")
EVENTS_DEAD = Counter("blobledger_events_dead",
                      "Events moved to the dead-letter state (max attempts reached)")
EVENTS_LAG = Gauge("blobledger_events_lag_seconds",
                   "How long the oldest pending event has waited (0: none pending)")
EVENTS_PENDING = Gauge("blobledger_events_pending", "Events not yet delivered")
EVENTS_DEAD_NOW = Gauge("blobledger_events_dead_now", "Events in the dead-letter state")


def record_delivery(report: Any) -> None:
    """Publish one delivery run (the delivery worker's ``DeliveryReport``)."""
    _LAST["events"] = {"at": time.time(), **report.as_dict()}
    EVENTS_DELIVERED.inc(report.delivered)
    EVENTS_FAILURES.inc(report.failures)
    EVENTS_DEAD.inc(report.dead)
    EVENTS_LAG.set(report.lag or 0.0)
    EVENTS_PENDING.set(report.pending)
    EVENTS_DEAD_NOW.set(report.dead_now)


#: the verdicts a processing run counts (``ProcessingReport``'s attributes of these names)
PROCESSING_OUTCOMES = ("accepted", "rejected", "failed", "lost")

PROCESSING_VERDICTS = Counter(
    "blobledger_processing_verdicts",
    "Processing outcomes, by outcome: accepted (a processor's acceptance recorded), rejected "
    "(a document rejected), failed (a run that could not decide), lost (a verdict refused: "
    "the claim was another worker's)", ["outcome"])
PROCESSING_HELD = Gauge("blobledger_processing_held",
                        "Held documents waiting for their processors")
PROCESSING_LAG = Gauge("blobledger_processing_lag_seconds",
                       "How long the oldest held document has waited (0: none held)")


def record_processing(report: Any) -> None:
    """Publish one processing run (the processing worker's ``ProcessingReport``, with
    ``held`` and ``lag`` read after the run)."""
    _LAST["processing"] = {"at": time.time(), **report.as_dict()}
    for outcome in PROCESSING_OUTCOMES:
        PROCESSING_VERDICTS.labels(outcome).inc(int(getattr(report, outcome)))
    PROCESSING_HELD.set(report.held)
    PROCESSING_LAG.set(report.lag or 0.0)
