"""The processing worker: held documents' work, claimed, run and decided (docs/pipeline.md).

One :meth:`ProcessingWorker.run_once` claims pending work of the processors configured here
(``BLOBLEDGER_PROCESSORS``) in batches, with a lease (``BLOBLEDGER_PROCESSING_LEASE``),
until none is left: for each row it reads the held document, runs the processor on its
bytes and records the verdict by compare-and-set on its claim's token
(:class:`blobledger.protocol.held.Held`). The last acceptance makes the document ready; a
rejection sends it to the deletion path. A run that fails (the scanner errored or timed
out) releases the row for a later attempt, after a backoff; after
``BLOBLEDGER_PROCESSING_ATTEMPTS`` failures the document is rejected with the last error.

A worker that dies or pauses mid-run loses nothing: its rows stay ``pending``, and once its
lease has expired another worker claims them (a new token), runs the processor again
(processors are idempotent) and decides; the paused worker's verdict, recorded later, loses
its compare-and-set. Runs inside ``serve`` (every ``BLOBLEDGER_PROCESSING_INTERVAL``) and
``blobledger sweep``, like the sweeper.

Failpoints: ``processing.after_claim``, ``processing.after_run`` (the verdict known, not
recorded), ``processing.after_verdict``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass

from sqlalchemy.exc import SQLAlchemyError

from blobledger import failpoints
from blobledger._base import metrics
from blobledger.errors import BlobLedgerError
from blobledger.protocol.documents import Document
from blobledger.protocol.held import Work
from blobledger.protocol.ledger import Ledger
from blobledger.workers.processors import Processor, ProcessorFailed, Verdict, configured
from blobledger.workers.supervisor import Worker

log = logging.getLogger("blobledger.processing")

#: rows claimed (and run at once) per batch
BATCH = 4
#: the longest wait before a failed run is tried again
MAX_BACKOFF = 300.0


@dataclass
class ProcessingReport:
    """What one run did; ``to_log()`` is the one summary line."""

    claimed: int = 0
    accepted: int = 0  # verdicts recorded (``ready`` among them)
    ready: int = 0  # documents the last acceptance made ready
    rejected: int = 0  # documents rejected and sent to the deletion path
    failed: int = 0  # runs that could not decide (tried again later)
    lost: int = 0  # verdicts refused: the claim was another worker's by then
    gone: int = 0  # work for a document no longer held (settled meanwhile)
    purged: int = 0  # rejections past the retention, forgotten
    held: int = 0  # documents still held after the run
    lag: float | None = None  # seconds the oldest of them has waited (None: none held)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        data["lag"] = None if self.lag is None else round(self.lag, 3)
        return data

    def to_log(self) -> str:
        return json.dumps({"event": "processing", **self.as_dict()})


def backoff(attempts: int) -> float:
    """Seconds before a run that failed ``attempts`` times is tried again."""
    return min(MAX_BACKOFF, 5.0 * 2.0 ** max(attempts - 1, 0))


class ProcessingWorker:
    """Runs the configured processors on held documents."""

    def __init__(self, ledger: Ledger, *, batch: int = BATCH,
                 processors: dict[str, Processor] | None = None) -> None:
        self.ledger = ledger
        self.batch = batch
        self.processors = configured(ledger.settings) if processors is None else processors

    async def run_once(self) -> ProcessingReport:
        report = ProcessingReport()
        started = time.perf_counter()
        settings = self.ledger.settings
        while True:
            token, work = await self.ledger.held.claim(
                tuple(self.processors), self.batch, settings.processing_lease)
            if not work:
                break
            report.claimed += len(work)
            await failpoints.hit("processing.after_claim")
            # every row of the batch decided before an error of one (the database gone
            # under its verdict) ends the run: none left running behind it
            outcomes = await asyncio.gather(*(self._one(token, item, report) for item in work),
                                            return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        report.purged = await self.ledger.held.purge(settings.idempotency_retention)
        report.held, report.lag = await self.ledger.held.waiting()
        report.seconds = time.perf_counter() - started
        metrics.record_processing(report)
        return report

    async def _one(self, token: str, work: Work, report: ProcessingReport) -> None:
        held = self.ledger.held
        doc = await held.document(work)
        if doc is None:
            report.gone += 1
            await held.drop(token, work)
            return
        try:
            verdict = await self._run(work, doc)
        except (ProcessorFailed, BlobLedgerError, OSError, TimeoutError) as exc:
            await self._failed(token, work, exc, report)
            return
        await failpoints.hit("processing.after_run")
        if verdict.accepted:
            outcome = await held.accept(token, work)
        else:
            outcome = await held.reject(token, work, verdict.reason or "rejected")
        self._count(outcome, report)
        log.info("%s", json.dumps({"event": "processed", "document_id": work.document_id,
                                   "version": work.version, "processor": work.processor,
                                   "outcome": outcome, "reason": verdict.reason}))
        await failpoints.hit("processing.after_verdict")

    async def _run(self, work: Work, doc: Document) -> Verdict:
        processor = self.processors[work.processor]
        store = self.ledger.store

        async def read(start: int, length: int | None) -> AsyncIterator[bytes]:
            reader = await store.open(doc.blob, start, length)
            try:
                async for chunk in reader:
                    yield chunk
            finally:
                await reader.aclose()

        async with asyncio.timeout(self.ledger.settings.processing_lease * 0.9):
            return await processor.run(doc, read)

    async def _failed(self, token: str, work: Work, exc: BaseException,
                      report: ProcessingReport) -> None:
        report.failed += 1
        why = str(exc) or type(exc).__name__
        log.warning("processor %s failed on %s (attempt %d): %s", work.processor,
                    work.document_id, work.attempts, why)
        if work.attempts >= self.ledger.settings.processing_attempts:
            outcome = await self.ledger.held.reject(
                token, work, f"{work.processor} failed {work.attempts} times: {why}")
            self._count(outcome, report)
            return
        if not await self.ledger.held.failed(token, work, why, backoff(work.attempts)):
            report.lost += 1

    @staticmethod
    def _count(outcome: str, report: ProcessingReport) -> None:
        if outcome in ("accepted", "ready"):
            report.accepted += 1
        if outcome == "ready":
            report.ready += 1
        elif outcome == "rejected":
            report.rejected += 1
        elif outcome == "lost":
            report.lost += 1
        elif outcome == "gone":
            report.gone += 1


async def process_forever(ledger: Ledger, *, interval: float, stop: asyncio.Event,
                          on_report: Callable[[ProcessingReport], None] | None = None,
                          on_run: Callable[[], None] | None = None) -> None:
    """Run the worker every ``interval`` seconds until ``stop`` is set; a run that fails
    (the database unreachable) is logged and the loop goes on. ``on_report``: after each run
    that claimed work; ``on_run``: after each run that completed."""
    worker = ProcessingWorker(ledger)
    while not stop.is_set():
        try:
            report = await worker.run_once()
            if on_report is not None and report.claimed:
                on_report(report)
            if on_run is not None:
                on_run()
        except (BlobLedgerError, SQLAlchemyError, OSError) as exc:
            log.warning("processing run failed: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


def background_processing(processors: tuple[str, ...], interval: float) -> Worker | None:
    """A worker for ``serve`` (None when no processors are configured)."""
    if not processors:
        return None

    async def processing(ledger: Ledger, beat: Callable[[], None]) -> None:
        await process_forever(ledger, interval=interval, stop=asyncio.Event(), on_run=beat)

    return Worker("processing", interval, processing)
