"""The JSON lines of :mod:`blobledger._base.logs`: structlog's
``structlog.stdlib.ProcessorFormatter`` on the root handler, its ``ExtraAdder``,
``add_log_level``, ``add_logger_name``, ``format_exc_info`` and ``JSONRenderer``; kept here
are only the processors of this project's own fields (the record's time, ``event`` and the
summary merge). A module of its own: only a process that writes JSON lines imports
structlog."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import structlog
from structlog.typing import EventDict, WrappedLogger

from blobledger._base.redact import ACCESS_FIELDS

#: the fields a line starts with, in this order (the others follow as they came)
_LEADING = ("time", "level", "logger", "event", "message")


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
    if event_dict["_record"].name == "uvicorn.access" and len(args) == len(ACCESS_FIELDS):
        event_dict.update(zip(ACCESS_FIELDS, args, strict=True))
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
