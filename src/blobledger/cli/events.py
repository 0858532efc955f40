"""``blobledger events``: list, show and replay the events (the outbox of what happened), and
deliver them to the configured webhooks (``deliver``, once or in a loop)."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import click

from blobledger._base.durations import parse_duration
from blobledger._base.redact import redact_url
from blobledger.cli import fail, run_async
from blobledger.cli._output import display_name, fields, is_terminal, print_json, table
from blobledger.errors import ConfigError
from blobledger.protocol import events
from blobledger.protocol.models import EventState, EventType
from blobledger.workers.delivery import Delivery, DeliveryReport, deliver_forever

from ._worker import worker_ledger

EXAMPLES = """\b
Examples:
  blobledger events list --state dead
  blobledger events list --document 0f3c... --json
  blobledger events show evt_5d1c...
  blobledger events replay evt_5d1c...
  blobledger events deliver --interval 5s
"""


@click.group(epilog=EXAMPLES)
def command() -> None:
    """Events: one per change (document.ready, document.replaced, document.deleted,
    document.rejected, attachment.attached, attachment.detached), written with the change
    and delivered at least once to the webhooks (BLOBLEDGER_WEBHOOK_URLS)."""


@command.command("list", epilog="\b\nExamples:\n  blobledger events list --state pending\n"
                 "  blobledger events list --type document.ready --limit 10")
@click.option("--state", type=click.Choice([s.value for s in EventState]),
              help="only events in this state")
@click.option("--type", "kind", type=click.Choice([t.value for t in EventType]),
              help="only events of this type")
@click.option("--document", "subject", metavar="ID|BLOB",
              help="only the events of this document (its id) or attachment (its blob)")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per event")
@run_async
async def list_events(state: str | None, kind: str | None, subject: str | None, limit: int,
                      as_json: bool) -> int:
    """List events in the order they were written: sequence, id, type, state, attempts,
    subject, created."""
    async with worker_ledger() as ledger, ledger.db.transaction(readonly=True) as conn:
        found = await events.listing(conn, state=state, type=kind, subject=subject,
                                     limit=limit)
    for event in found:
        if as_json:
            print_json(event.to_json())
        else:
            print(fields([event.id, event.event_id, event.type, event.state, event.attempts,
                          event.subject, event.to_json()["created_at"]]))
    return 0


@command.command(epilog="\b\nExamples:\n  blobledger events show evt_5d1c...")
@click.argument("event_id", metavar="EVENT_ID")
@click.option("--json", "as_json", is_flag=True, help="the event and its log as one JSON line")
@run_async
async def show(event_id: str, as_json: bool) -> int:
    """Show one event, its payload and its attempt log."""
    async with worker_ledger() as ledger, ledger.db.transaction(readonly=True) as conn:
        found = await events.find(conn, event_id)
    if found is None:
        return fail(f"no event {display_name(event_id)!r} (see `blobledger events list`)")
    event, attempts = found
    shown = _redacted(event.to_json())
    log = [_redacted(a.to_json()) for a in attempts]
    if as_json:
        print_json({**shown, "log": log})
        return 0
    rows = [(key, str(value)) for key, value in shown.items() if key != "data"]
    rows += [(f"data.{key}", str(value)) for key, value in sorted(event.payload.items())]
    lines = [[str(line["attempt"]), str(line["target"]), str(line["outcome"]),
              str(line["status_code"] or "-"), str(line["started_at"]), str(line["error"] or "")]
             for line in log]
    if is_terminal(sys.stdout):
        table(None, ["field", "value"], [list(row) for row in rows], multiline=False)
        table(f"log: {len(attempts)} attempt(s)",
              ["attempt", "target", "outcome", "status", "started", "error"], lines,
              multiline=False)
        return 0
    width = max(len(key) for key, _ in rows) + 2  # every value in one column
    for key, value in [*rows, ("log", f"{len(attempts)} attempt(s)")]:
        print(f"{key + ':':<{width}}{display_name(value)}")
    for line in lines:
        print("  " + fields(line))
    return 0


def _redacted(data: dict[str, Any]) -> dict[str, Any]:
    """An event's or an attempt's fields with no credential of a webhook's URL in them
    (its target, its errors: rows written before the attempt log redacted them)."""
    return {key: redact_url(value) if key in ("target", "error", "last_error")
            and isinstance(value, str) else value for key, value in data.items()}


@command.command(epilog="\b\nExamples:\n  blobledger events replay evt_5d1c...")
@click.argument("event_ids", metavar="EVENT_ID...", nargs=-1, required=True)
@run_async
async def replay(event_ids: tuple[str, ...]) -> int:
    """Send dead or delivered events again: back to pending, due now, attempts reset."""
    async with worker_ledger() as ledger:
        for event_id in event_ids:
            async with ledger.db.transaction() as conn:
                done = await events.replay(conn, event_id, ledger.clock_offset)
                found = None if done else await events.find(conn, event_id)
            if not done:
                if found is None:
                    return fail(f"no event {display_name(event_id)!r} "
                                "(see `blobledger events list`)")
                return fail(f"event {event_id} is {found[0].state}: only dead or delivered "
                            "events are replayed")
            print(f"{event_id}\tpending")
    return 0


@command.command(epilog="\b\nExamples:\n  blobledger events deliver\n"
                 "  blobledger events deliver --interval 5s")
@click.option("--interval", metavar="DURATION",
              help="deliver every DURATION (1, 5s, 1m) until interrupted (default: once)")
@run_async
async def deliver(interval: str | None) -> int:
    """Deliver due events to the configured webhooks (BLOBLEDGER_WEBHOOK_URLS); prints one
    JSON summary per run. In-process handlers run in the application that registered them."""
    every = None if interval is None else parse_duration(interval, what="--interval")
    if every is not None and every <= 0:
        raise ConfigError("--interval must be positive")
    async with worker_ledger() as ledger:
        if not ledger.settings.webhook_urls:
            raise ConfigError("no webhook to deliver to: set BLOBLEDGER_WEBHOOK_URLS and "
                              "BLOBLEDGER_WEBHOOK_SECRET")
        if every is None:
            report = await Delivery(ledger).run_once()
            emit(report)
            return 1 if report.failures else 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await deliver_forever(ledger, interval=every, stop=stop, on_report=emit)
        return 0


def emit(report: DeliveryReport) -> None:
    print(report.to_log(), flush=True)
