"""Logging set-up: readable text, or one JSON object per line and event (``--log-format
json``).

A JSON line carries ``time``, ``level``, ``logger``, ``event`` and ``message``, plus every
field the record was given with ``extra=`` (``blobledger.document_id``,
``blobledger.blob_name``, ``blobledger.outcome``, ...). ``event`` is the name the same step
has as a span and in the metrics (``begin_create``, ``sweep.batch``, ``reconcile.page``);
records logged without one use their message. A message that is itself a JSON object (the
sweeper's and the reconciler's run summaries) is merged into the line, not quoted.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

#: attributes every LogRecord has: anything else came in through ``extra=``
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", None) or message,
            "message": message,
        }
        if message.startswith("{"):  # a summary already in JSON (sweep, reconcile): merged
            try:
                summary = json.loads(message)
            except ValueError:
                summary = None
            if isinstance(summary, dict):
                line.update(summary)
                line["message"] = str(summary.get("event", ""))
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value if isinstance(value, str | int | float | bool | None) \
                    else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(level: str = "WARNING", log_format: str = "text") -> None:
    """Configure the root logger once: ``text`` or ``json`` on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.WARNING))
    if log_format == "json" and root.level <= logging.INFO:
        from blobledger import telemetry

        telemetry.log_events(True)
