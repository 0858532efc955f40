"""What ``blobledger doctor`` adds about event delivery: how long the oldest pending event has
waited, read from the database.

``serve`` runs the delivery worker while ``BLOBLEDGER_WEBHOOK_URLS`` is set; a worker that
runs claims each due event within ``BLOBLEDGER_EVENT_INTERVAL``. The check warns (never
fails) when the oldest pending event has waited longer than the supervisor allows a worker
without a completed run (twice the interval plus ``BLOBLEDGER_WORKER_GRACE``): the delivery
worker is down or stalled, or a target keeps failing (the event waits out its backoff), which
``blobledger events list`` tells apart. Dead events (no more tries, waiting for a replay)
warn too.
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from blobledger.config import Settings
from blobledger.errors import BlobLedgerError
from blobledger.protocol import events
from blobledger.protocol.ledger import Ledger
from blobledger.workers.doctor.checks import INFO, PASS, UNKNOWN, WARN, Report

DELIVERY_LAG = "event delivery (BLOBLEDGER_EVENT_INTERVAL)"


async def delivery_check(settings: Settings, report: Report) -> None:
    """Add the event delivery check to ``report`` (n/a without webhooks: in-process
    handlers are delivered by their application's own worker)."""
    if not settings.webhook_urls:
        report.add(DELIVERY_LAG, False, INFO, "n/a: BLOBLEDGER_WEBHOOK_URLS not set")
        return
    try:
        async with Ledger.from_settings(settings, migrate=False, create=False) as ledger, \
                ledger.db.transaction(readonly=True) as conn:
            lag = await events.oldest_pending(conn, ledger.clock_offset)
            dead = (await events.counts(conn))[events.DEAD]
    except (BlobLedgerError, SQLAlchemyError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        report.add(DELIVERY_LAG, False, UNKNOWN, f"database not readable: {first[:200]}")
        return
    allowance = 2 * settings.event_interval + settings.worker_grace
    problems = []
    if lag is not None and lag > allowance:
        problems.append(
            f"the oldest pending event has waited {lag:.0f} s, more than twice "
            f"BLOBLEDGER_EVENT_INTERVAL plus BLOBLEDGER_WORKER_GRACE ({allowance:g} s): the "
            "delivery worker is down or stalled (serve's /readyz and /ops/workers name it), "
            "or a target keeps failing (blobledger events list)")
    if dead:
        problems.append(f"{dead} dead event(s) wait for a replay (blobledger events replay)")
    if problems:
        report.add(DELIVERY_LAG, False, WARN, "; ".join(problems))
    else:
        report.add(DELIVERY_LAG, False, PASS, "no event waiting" if lag is None
                   else f"oldest pending event: {lag:.0f} s")
