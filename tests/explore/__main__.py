"""``python -m tests.explore --minutes N``: the interleaving explorer for longer than the suite
allows; prints how many examples, steps and distinct interleavings it ran. A violation stops
it with hypothesis' shrunk trace of steps (exit 1)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter

from tests.explore.machine import STATS, Backend, PostgresAzure, SqliteLocal, explore
from tests.support.services import Azurite, start_azurite, temp_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/explore", description=__doc__)
    parser.add_argument("--minutes", type=float, default=5.0, help="how long (default 5)")
    parser.add_argument("--backend", choices=["sqlite-local", "postgresql-azure", "both"],
                        default="sqlite-local")
    parser.add_argument("--batch", type=int, default=25, help="examples per hypothesis run")
    parser.add_argument("--steps", type=int, default=40, help="steps per example at most")
    args = parser.parse_args(argv)
    # A paused sweeper that lost its claims says so at WARNING; expected here, not news.
    logging.getLogger("blobledger").setLevel(logging.ERROR)
    names = ["sqlite-local", "postgresql-azure"] if args.backend == "both" else [args.backend]
    seconds = args.minutes * 60 / len(names)
    started = time.monotonic()
    azurite: Azurite | None = None
    status = 0
    try:
        with temp_dir("blobledger-explore-") as root:
            for name in names:
                backend: Backend
                if name == "sqlite-local":
                    backend = SqliteLocal(root)
                else:
                    azurite = azurite or start_azurite()
                    backend = PostgresAzure(azurite.connection_string)
                print(f"exploring {name} for {seconds / 60:g} min", flush=True)
                try:
                    explore(backend, seconds=seconds, batch=args.batch, steps=args.steps,
                            on_batch=lambda: print(_progress(started), flush=True))
                except AssertionError as exc:
                    steps = "\n".join(getattr(exc, "__notes__", []))
                    print(f"violation on {name}:\n{exc}\n{steps}", file=sys.stderr)
                    status = 1
                    break
    finally:
        if azurite is not None:
            azurite.stop()
    print(_summary(started))
    return status


def _progress(started: float) -> str:
    return (f"  {time.monotonic() - started:7.0f}s  examples {STATS.examples}  "
            f"steps {STATS.steps}  distinct interleavings {len(STATS.interleavings)}")


def _summary(started: float) -> str:
    pairs = Counter(pair for sequence in STATS.interleavings for pair in sequence
                    if pair[1] and pair[0] in ("create", "retry", "replace", "delete",
                                                        "sweeper"))
    return "\n".join([
        f"ran {STATS.examples} examples, {STATS.steps} steps in "
        f"{time.monotonic() - started:.0f}s",
        f"distinct interleavings (sequences of (operation, step) and resolver runs): "
        f"{len(STATS.interleavings)}",
        f"distinct (operation, step) suspensions: {len(pairs)}",
    ])


if __name__ == "__main__":
    sys.exit(main())
