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

The JSON lines are structlog's (:mod:`blobledger._base.jsonlog`, imported only by a process
that writes them: structlog and what it loads cost every command's start-up a tenth of its
imports). The text lines stay a plain ``logging.Formatter``: nothing in them needs a
processor.
"""

from __future__ import annotations

import logging
from typing import Any

from blobledger._base.redact import ACCESS_FIELDS, redact, redact_url

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_format = "text"


class RedactTokens(logging.Filter):
    """Rewrites uvicorn's access-log record so that its target (the path and query) holds
    no credential: a direct upload's ``PUT /uploads/<id>/content?token=...`` is logged
    with ``token=REDACTED``, in the text and the JSON lines alike."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == len(ACCESS_FIELDS) \
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


#: the Azure SDK's log of every request it sends and every answer (their headers), at INFO
AZURE_HTTP_LOG = "azure.core.pipeline.policies.http_logging_policy"


def setup_logging(level: str = "WARNING", log_format: str = "text") -> None:
    """Configure the root logger once: ``text`` or ``json`` on stderr. The Azure SDK's
    request log shows at ``DEBUG`` only, as botocore's does: ``INFO`` is blobledger's own
    events (and the SDK's lines, several for every request, would drown them)."""
    global _format
    _format = log_format
    handler = logging.StreamHandler()
    handler.setFormatter(_json_formatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.WARNING))
    logging.getLogger(AZURE_HTTP_LOG).setLevel(
        logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
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
    print(_json_formatter().format(record), flush=True)


def _json_formatter() -> logging.Formatter:
    from blobledger._base.jsonlog import JsonFormatter

    return JsonFormatter()
