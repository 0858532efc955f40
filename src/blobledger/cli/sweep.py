"""``blobledger sweep``: resolve stale intents and run the deletion path, once or in a loop."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from blobledger.durations import parse_duration
from blobledger.errors import ConfigError
from blobledger.sweeper import Sweeper, SweepReport, sweep_forever

from ._worker import worker_ledger


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sweep", help="sweep stale uploads and delete released blobs",
        description="Sweep pending intents older than BLOBLEDGER_SWEEP_AFTER and delete "
        "blobs in `deleting` after BLOBLEDGER_DELETE_GRACE. Prints one JSON summary per run.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one run, then exit (the default)")
    mode.add_argument("--interval", metavar="DURATION",
                      help="run every DURATION (90, 30s, 5m) until interrupted")
    parser.add_argument("--batch", type=int, default=256, metavar="N",
                        help="rows claimed per batch (1-5000, default 256)")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    if not 1 <= args.batch <= 5000:
        raise ConfigError(f"--batch {args.batch}: use 1 to 5000")
    interval = None if args.interval is None else parse_duration(args.interval,
                                                                  what="--interval")
    if interval is not None and interval <= 0:
        raise ConfigError("--interval must be positive")
    async with worker_ledger() as ledger:
        if interval is None:
            report = await Sweeper(ledger, batch=args.batch).run_once()
            emit(report)
            if report.aborted:
                print(f"blobledger: error: sweep stopped: {report.aborted}", file=sys.stderr)
            return 1 if report.errors else 0
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await sweep_forever(ledger, interval=interval, batch=args.batch, stop=stop,
                            on_report=emit)
        return 0


def emit(report: SweepReport) -> None:
    print(report.to_log(), flush=True)
