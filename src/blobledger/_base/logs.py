"""Logging set-up: readable text, or one JSON object per line and event (``--log-format
json``), for every logger of the process: ours, uvicorn's (``uvicorn.error``,
``uvicorn.access``: :mod:`blobledger.api.server` starts uvicorn without a logging config of
its own, so its records reach the root handler) and SQLAlchemy's.

A JSON line carries ``time``, ``level``, ``logger``, ``event`` and ``message``, plus every
field the record was given with ``extra=`` (``blobledger.document_id``,
``blobledger.blob_name``, ``blobledger.outcome``, ...). ``event`` is the name the same step
has as a span and in the metrics (``begin_create``, ``sweep.batch``, ``reconcile.page``);
records logged without one use their message. A message that is itself a JSON object (the
sweeper's and the reconciler's run summaries) is merged into the line, not quoted. An access
line of uvicorn also carries ``http.client``, ``http.method``, ``http.target`` and
``http.status``. Its target never shows a credential: the value of a query parameter that
carries one (``token``, ``access_token``, a SAS's ``sig``, a presigned URL's signature)
is written as ``REDACTED`` (:class:`RedactTokens`, on uvicorn's access logger).

The JSON lines are structlog's (``structlog.stdlib.ProcessorFormatter`` on the root handler,
its ``ExtraAdder``, ``add_log_level``, ``add_logger_name``, ``format_exc_info`` and
``JSONRenderer``); kept here are only the processors of this project's own fields (the
record's time, ``event`` and the summary merge). The text lines stay a plain
``logging.Formatter``: nothing in them needs a processor.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import structlog
from structlog.typing import EventDict, WrappedLogger

from blobledger._base.redact import redact, redact_url

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
#: the fields a line starts with, in this order (the others follow as they came)
_LEADING = ("time", "level", "logger", "event", "message")
#: the arguments of uvicorn's access-log record, in its order
_ACCESS_FIELDS = ("http.client", "http.method", "http.target", "http.version", "http.status")
_format = "text"
class RedactTokens(logging.Filter):
    """Rewrites uvicorn's access-log record so that its target (the path and query) holds
    no credential: a direct upload's ``PUT /uploads/<id>/content?token=...`` is logged
    with ``token=REDACTED``, in the text and the JSON lines alike."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == len(_ACCESS_FIELDS) \
                and isinstance(args[2], str):
            record.args = (*args[:2], redact(args[2]), *args[3:])
        return True


class RedactUrls(logging.Filter):
    """Rewrites a record's URL arguments so that none holds a credential (httpx's
    ``HTTP Request: POST <url>`` line of a webhook's call: its password, its ``token``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_url(str(arg)) if "://" in str(arg) else arg
                                for arg in record.args)
        return True


def first_line(exc: BaseException, limit: int = 200) -> str:
    """An exception told in one line for a message: its text's first line (at most
    ``limit`` characters), or its type's name when it says nothing."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__


def redact_access_log() -> None:
    """Install :class:`RedactTokens` on uvicorn's access logger (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in access.filters):
        access.addFilter(RedactTokens())


def _record_time(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """``time``: when the record was made (not when it is written), UTC, milliseconds."""
    record: logging.LogRecord = event_dict["_record"]
    event_dict["time"] = datetime.fromtimestamp(record.created, UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")
    return event_dict


def _message(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """``message``: the record's text (ProcessorFormatter's first ``event``)."""
    event_dict["message"] = event_dict["event"]
    return event_dict


def _event_and_message(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """``event``: the record's ``extra={"event": ...}``, else its text; a text that is a
    JSON object (a run summary) merged into the line."""
    record: logging.LogRecord = event_dict["_record"]
    message = str(event_dict["message"])
    event_dict["event"] = getattr(record, "event", None) or message
    if message.startswith("{"):
        try:
            summary = json.loads(message)
        except ValueError:
            summary = None
        if isinstance(summary, dict):
            event_dict.update(summary)
            event_dict["message"] = str(summary.get("event", ""))
    return event_dict


def _access_fields(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """uvicorn's access line as fields too (its record's five arguments)."""
    args = event_dict.pop("positional_args", ())
    if event_dict["_record"].name == "uvicorn.access" and len(args) == len(_ACCESS_FIELDS):
        event_dict.update(zip(_ACCESS_FIELDS, args, strict=True))
    return event_dict


def _plain_values(_: WrappedLogger, __: str, event_dict: EventDict) -> EventDict:
    """Leading fields first; every value JSON can hold as it is, anything else as text."""
    ordered = {key: event_dict.pop(key) for key in _LEADING if key in event_dict}
    ordered.update(event_dict)
    return {key: value if isinstance(value, str | int | float | bool | None) else str(value)
            for key, value in ordered.items() if not key.startswith("_")}


class JsonFormatter(structlog.stdlib.ProcessorFormatter):
    """One JSON object per record, on one line (any stdlib logger's record)."""

    def __init__(self) -> None:
        super().__init__(
            foreign_pre_chain=[_message, structlog.stdlib.ExtraAdder()],
            processors=[
                _record_time, structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                _event_and_message, _access_fields, structlog.processors.format_exc_info,
                _plain_values, structlog.processors.JSONRenderer(ensure_ascii=False),
            ],
            pass_foreign_args=True)


def setup_logging(level: str = "WARNING", log_format: str = "text") -> None:
    """Configure the root logger once: ``text`` or ``json`` on stderr."""
    global _format
    _format = log_format
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.WARNING))
    outgoing = logging.getLogger("httpx")  # its request lines carry the URL called
    if not any(isinstance(f, RedactUrls) for f in outgoing.filters):
        outgoing.addFilter(RedactUrls())
    if log_format == "json" and root.level <= logging.INFO:
        from blobledger import telemetry

        telemetry.log_events(True)


def announce(message: str, event: str, **fields: Any) -> None:
    """A line for the user on stdout, whatever the log level: the text as it is, or, in
    the JSON format, a JSON line (``event``, ``message`` and ``fields``) as the logs'."""
    if _format != "json":
        print(message, flush=True)
        return
    record = logging.LogRecord("blobledger", logging.INFO, __file__, 0, message, None, None)
    record.__dict__.update(fields, event=event)
    print(JsonFormatter().format(record), flush=True)
