"""``blobledger sweep``: resolve stale intents and run the deletion path, once or in a loop."""

from __future__ import annotations

import asyncio
import signal
import sys

import click

from blobledger._base.durations import parse_duration
from blobledger.cli import run_async
from blobledger.errors import ConfigError
from blobledger.workers.processing import ProcessingReport, ProcessingWorker, process_forever
from blobledger.workers.sweeper import Sweeper, sweep_forever
from blobledger.workers.sweeper.batches import SweepReport

from ._worker import worker_ledger

EXAMPLES = """\b
Examples:
  blobledger sweep --once
  blobledger sweep --interval 5m --batch 1000
"""


#: how long ``--once`` waits on SQLite for another process's run (``serve``'s) to end
ONCE_LOCK_WAIT = 5.0


@click.command(epilog=EXAMPLES)
@click.option("--once", is_flag=True, help="one run, then exit (the default)")
@click.option("--interval", metavar="DURATION",
              help="run every DURATION (90, 30s, 5m) until interrupted")
@click.option("--batch", type=click.IntRange(1, 5000), default=256, show_default=True,
              metavar="N", help="rows claimed per batch (1-5000)")
@run_async
async def command(once: bool, interval: str | None, batch: int) -> int:
    """Sweep pending intents older than BLOBLEDGER_SWEEP_AFTER and delete blobs in
    `deleting` after BLOBLEDGER_DELETE_GRACE; with BLOBLEDGER_PROCESSORS set, run them on
    held documents too. Prints one JSON summary per run."""
    if once and interval is not None:
        raise click.UsageError("--once and --interval exclude each other")
    every = None if interval is None else parse_duration(interval, what="--interval")
    if every is not None and every <= 0:
        raise ConfigError("--interval must be positive")
    async with worker_ledger() as ledger:
        processing = bool(ledger.settings.processors)
        if every is None:
            failed = 0
            if processing:
                processed = await ProcessingWorker(ledger).run_once()
                emit(processed)
                failed = processed.failed
            report = await Sweeper(ledger, batch=batch, lock_wait=ONCE_LOCK_WAIT).run_once()
            emit(report)
            if report.aborted:
                print(f"blobledger: error: sweep stopped: {report.aborted}", file=sys.stderr)
            return 1 if report.errors or failed else 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        workers = [sweep_forever(ledger, interval=every, batch=batch, stop=stop,
                                 on_report=emit)]
        if processing:
            workers.append(process_forever(
                ledger, interval=min(every, ledger.settings.processing_interval), stop=stop,
                on_report=emit))
        await asyncio.gather(*workers)
        return 0


def emit(report: SweepReport | ProcessingReport) -> None:
    print(report.to_log(), flush=True)
