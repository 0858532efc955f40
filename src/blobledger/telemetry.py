"""OpenTelemetry spans, optional (``pip install 'blobledger[otel]'``), off by default and
free when off.

One span per protocol step (see docs/protocol.md), named as the ledger's method for it:

============  ==================  ============================================
span          step                where
============  ==================  ============================================
create        C1-C4               ``Ledger.create``, parent of the five below
begin_create  C1                  the pending document and blob row
upload        C2 / R2             the create-only upload
confirm       between C2 and C3   the writer confirms it still owns the intent
tag_committed C3 / R3             the retag ``state=committed``
commit_create C4                  the document ready
replace       R1-R4               ``Ledger.replace``, parent of the five below
begin_replace R1                  the pending blob row of the new bytes
commit_replace R4                 the document on the new blob
sweep.batch   sweeper             one batch of stale intents
deletion.batch R5, deletion path  one batch of blobs in ``deleting``
reconcile.page reconciler         one page of the container listing
============  ==================  ============================================

Attributes: ``blobledger.step`` (C1 ...), ``blobledger.document_id``,
``blobledger.blob_name``, ``blobledger.outcome`` (``ok``, or what went wrong: the exception's
class name, or a step's own word such as ``lost``). The same names are the ``event`` of the
JSON log lines and the labels of the metrics.

With :func:`log_events` on (``--log-format json`` at ``--log-level info`` or lower), each
finished step is also one log record whose ``event`` is the span's name.

Off (the default), :func:`span` returns one shared object whose methods do nothing, and
``opentelemetry`` is never imported. :func:`enable` (called when the ``otel`` setting is on,
or by an application that configured its own tracer provider) turns spans on, and
:func:`instrument_engine` adds SQLAlchemy's spans underneath.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Any

PREFIX = "blobledger."
_tracer: Any = None
_provider: Any = None
#: log one record per finished step on ``blobledger.events`` (``--log-format json``)
_events = False
events_log = logging.getLogger("blobledger.events")


class _Off:
    """The span when tracing is off: a do-nothing context manager (one shared instance)."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def set(self, key: str, value: str | int | float | bool | None) -> None:
        """Set ``blobledger.<key>`` on the span (nothing when off)."""

    def outcome(self, value: str) -> None:
        """The step's outcome, when it is not simply ``ok`` (nothing when off)."""


OFF = _Off()
#: what :func:`span` returns: a live span or :data:`OFF`
SpanLike = _Off


class Span(_Off):
    """A live span: started on enter, ended on exit with its outcome."""

    __slots__ = ("_attributes", "_manager", "_name", "_outcome", "_span", "_started")

    def __init__(self, name: str, attributes: dict[str, Any]) -> None:
        self._name = name
        self._attributes = attributes
        self._outcome: str | None = None
        self._manager: Any = None
        self._span: Any = None
        self._started = 0.0

    def __enter__(self) -> Span:
        self._started = time.perf_counter()
        if _tracer is not None:
            self._manager = _tracer.start_as_current_span(
                self._name, attributes=self._attributes, record_exception=True,
                set_status_on_exception=True)
            self._span = self._manager.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        outcome = self._outcome or ("ok" if exc is None else type(exc).__name__)
        if self._span is not None:
            self._span.set_attribute(PREFIX + "outcome", outcome)
            self._manager.__exit__(kind, exc, tb)
        if _events:
            fields = {**self._attributes, PREFIX + "outcome": outcome,
                      "duration_ms": round((time.perf_counter() - self._started) * 1000, 3)}
            events_log.info("%s %s", self._name, outcome, extra={"event": self._name,
                                                                 **fields})

    def set(self, key: str, value: str | int | float | bool | None) -> None:
        if value is not None:
            self._attributes[PREFIX + key] = value
            if self._span is not None:
                self._span.set_attribute(PREFIX + key, value)

    def outcome(self, value: str) -> None:
        self._outcome = value


def span(name: str, *, step: str | None = None, document_id: str | None = None,
         blob_name: str | None = None, **attributes: str | int | float | bool | None
         ) -> _Off:
    """The span of one step (``with telemetry.span("upload", step="C2", ...) as s:``)."""
    if _tracer is None and not _events:
        return OFF
    values = {PREFIX + key: value for key, value in (
        ("step", step), ("document_id", document_id), ("blob_name", blob_name),
        *attributes.items()) if value is not None}
    return Span(name, values)


def enabled() -> bool:
    """Spans or step events are on."""
    return _tracer is not None or _events


def log_events(on: bool = True) -> None:
    """Log one record per finished step (name, attributes, outcome, duration) on
    ``blobledger.events`` at INFO: the JSON log lines of ``--log-format json``."""
    global _events
    _events = on


def enable(tracer_provider: Any = None) -> None:
    """Turn spans on, on ``tracer_provider`` (default: the global one). Needs the ``otel``
    extra."""
    global _tracer, _provider
    try:
        from opentelemetry import trace
    except ImportError:
        from blobledger.errors import ConfigError

        raise ConfigError("BLOBLEDGER_OTEL needs OpenTelemetry: pip install "
                          "'blobledger[otel]'") from None
    from importlib.metadata import version

    _provider = tracer_provider or trace.get_tracer_provider()
    _tracer = _provider.get_tracer("blobledger", version("blobledger"))


def disable() -> None:
    """Turn spans off again (tests)."""
    global _tracer, _provider
    _tracer = _provider = None


def instrument_engine(engine: Any) -> None:
    """SQLAlchemy's own spans (one per statement) for this async engine, under ours, on the
    same tracer provider. The instrumentation's declared SQLAlchemy range lags the releases;
    its engine hooks are the stable event API, so the range is not enforced. Its listeners
    make the engine observed (:meth:`blobledger.db.Database.observed`): on PostgreSQL the
    one-statement C1 and C4 then run through SQLAlchemy, not on the driver, so that their
    statements have spans (a group commit's batch: one root span)."""
    if _tracer is None:
        return
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

    instrumentor = SQLAlchemyInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:  # a further engine in this process
        instrumentor._instrument(  # type: ignore[no-untyped-call]
            engine=engine.sync_engine, tracer_provider=_provider)
    else:
        instrumentor.instrument(engine=engine.sync_engine, tracer_provider=_provider,
                                skip_dep_check=True)


def setup_sdk() -> None:
    """For the command line with ``otel`` on: a tracer provider of the SDK exporting over
    OTLP (``OTEL_EXPORTER_OTLP_*``, when the exporter package is installed) or else to
    stderr, unless the process already has one (``opentelemetry-instrument``)."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if isinstance(trace.get_tracer_provider(), TracerProvider):
        enable()
        return
    provider = TracerProvider(resource=Resource.create({"service.name": "blobledger"}))
    exporter: Any
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore
            OTLPSpanExporter,
        )

        exporter = OTLPSpanExporter()
    except ImportError:
        import sys

        exporter = ConsoleSpanExporter(out=sys.stderr)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    enable(provider)
