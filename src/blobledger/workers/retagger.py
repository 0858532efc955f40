"""The retag worker: the deferred C3/R3 (``BLOBLEDGER_RETAG=deferred``, docs/protocol.md).

With the deferred retag, C4 and R4 commit the blob row while the blob is still tagged
``pending`` and stamp ``retag_due`` in the same statement. :meth:`Retagger.run_once` does
the owed retags, in claimed batches until none is left:

1. **claim** committed rows with ``retag_due`` set whose lease has run out, with a claim
   token and a lease (``Transitions.claim_retags``; on PostgreSQL ``FOR UPDATE SKIP
   LOCKED``): two workers never retag the same row at once;
2. **retag** each blob ``committed`` conditioned on ``pending`` (on Azure an untagged blob,
   a direct upload's, counts as ``pending``). Already ``committed``: done (an earlier worker
   retagged it and died, or slept, before recording). Anything else (``deleting``, absent):
   the row moved on (a replace or a delete took it to ``deleting``); not recorded here;
3. **record** by compare-and-set on the row still ``committed`` and still this claim's
   token: ``retag_due`` and the claim cleared.

A worker paused anywhere is harmless: its retag is conditioned on ``pending`` (it cannot
take a blob back from ``deleting``, and finds nothing where the blob was deleted; at worst
it tags ``committed`` a blob whose row became ``deleting`` meanwhile, which the deletion
path retags and deletes) and its record loses once another worker claimed the row. The
lag (the oldest owed retag) is the gauge ``blobledger_retag_lag_seconds``.

It runs inside ``blobledger sweep`` (first in every run) and, deferred, in ``serve`` (every
``BLOBLEDGER_RETAG_INTERVAL``, and :data:`RETAG_LINGER` after a C4 or R4 of the same process
left a retag owed). Failpoints: ``retag.after_claim``, ``retag.after_tag``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from blobledger import failpoints, telemetry
from blobledger._base import metrics
from blobledger.errors import BlobLedgerError, BlobNotFound, ConditionNotMet, StoreUnavailable
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import COMMITTED_TAG as COMMITTED
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import STATE_TAG, BlobState
from blobledger.workers.supervisor import Worker

log = logging.getLogger("blobledger.retag")

#: how long a claimed owed retag belongs to the worker that claimed it
RETAG_LEASE = 60.0
#: tag writes in flight at once
CONCURRENCY = 16
#: how long a worker woken by a C4/R4 waits before it claims, so that the retags a burst of
#: creates owes are claimed and recorded together (two transactions a batch, not a create);
#: it adds at most this much to the lag, which is warned about only past minutes. A second,
#: not 0.1 s: at two creates in flight 20 ms from the store, 0.1 s made batches of five or
#: six, and a batch's claim, record and lag reading cost this process about 0.6 ms of CPU
#: per retag more than in batches of fifty (1.55 against 0.96 ms, the store's server 1.23
#: against 0.77), CPU the writers beside it share (bench/RESULTS.md)
RETAG_LINGER = 1.0


@dataclass
class RetagReport:
    """What one run did."""

    retagged: int = 0  # retags recorded (the blob tagged committed, the marker cleared)
    moved_on: int = 0  # rows whose blob was no longer pending nor committed (or absent)
    lost: int = 0  # tagged, but the record lost (the row moved on or was claimed again)
    errors: int = 0  # tag writes that failed; retried after the lease


class Retagger:
    """Performs the retags C4/R4 left owed, fenced by claim token and lease."""

    def __init__(self, ledger: Ledger, *, batch: int = 256, lease: float = RETAG_LEASE,
                 max_batches: int | None = None) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.ledger = ledger
        self.batch = batch
        self.lease = lease
        self.max_batches = max_batches

    async def run_once(self) -> RetagReport:
        """Claim, retag and record batches until none is claimable; the lag measured."""
        report = RetagReport()
        batches = 0
        transitions = self.ledger.transitions
        while self.max_batches is None or batches < self.max_batches:
            token, names = await transitions.claim_retags(self.batch, self.lease)
            if not names:
                break
            batches += 1
            with telemetry.span("retag.batch", rows=len(names)):
                await failpoints.hit("retag.after_claim")
                outcomes = await self._retag_all(names)
                done = [n for n, o in zip(names, outcomes, strict=True) if o == "tagged"]
                report.moved_on += outcomes.count("moved_on")
                report.errors += outcomes.count("error")
                await failpoints.hit("retag.after_tag")
                recorded = await transitions.record_retagged(token, done)
            report.retagged += len(recorded)
            report.lost += len(done) - len(recorded)
            if len(names) < self.batch:
                break
        metrics.RETAGGED.inc(report.retagged)
        metrics.RETAG_LAG.set(await transitions.retag_lag())
        return report

    async def _retag_all(self, names: list[str]) -> list[str]:
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one(name: str) -> str:
            async with semaphore:
                return await self._retag(name)

        return list(await asyncio.gather(*(one(n) for n in names)))

    async def _retag(self, name: str) -> str:
        """``committed`` conditioned on ``pending``: tagged (or found tagged), moved_on or
        error."""
        store = self.ledger.store
        try:
            await store.set_tags(name, COMMITTED, if_tags=PENDING)
            return "tagged"
        except BlobNotFound:
            return "moved_on"
        except ConditionNotMet:
            try:
                state = (await store.get_tags(name)).get(STATE_TAG)
            except BlobNotFound:
                return "moved_on"
            return "tagged" if state == BlobState.COMMITTED else "moved_on"
        except StoreUnavailable:
            raise
        except BlobLedgerError as exc:
            log.warning("retag of %s failed: %s", name, exc)
            return "error"


async def retag_forever(ledger: Ledger, *, interval: float, stop: asyncio.Event,
                        batch: int = 256, linger: float = RETAG_LINGER,
                        on_run: Callable[[], None] | None = None) -> None:
    """Run the retag worker every ``interval`` seconds, or ``linger`` seconds after a C4/R4
    of this process left a retag owed, until ``stop`` is set. Failures are logged and
    retried; ``on_run`` is called after each run that completed."""
    retagger = Retagger(ledger, batch=batch)
    while not stop.is_set():
        ledger.retag_owed.clear()
        try:
            await retagger.run_once()
            if on_run is not None:
                on_run()
        except (BlobLedgerError, SQLAlchemyError, OSError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            log.warning("retag run failed: %s: %s", type(exc).__name__, first)
        waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(
            ledger.retag_owed.wait())]
        try:
            await asyncio.wait(waits, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
        if ledger.retag_owed.is_set() and not stop.is_set():
            with suppress(TimeoutError):  # the rest of the burst joins this claim; a stop
                await asyncio.wait_for(stop.wait(), linger)  # ends the wait at once


def background_retagger(deferred: bool, interval: float) -> Worker | None:
    """A worker for ``serve`` doing owed retags (None when the retag is inline)."""
    if not deferred:
        return None

    async def retagger(ledger: Ledger, beat: Callable[[], None]) -> None:
        await retag_forever(ledger, interval=interval, stop=asyncio.Event(), on_run=beat)

    return Worker("retagger", interval, retagger)
