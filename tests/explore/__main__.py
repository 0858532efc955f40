"""``python -m tests.explore --minutes N [--store local|azure|s3] [--db sqlite|postgres]
[--retag inline|deferred|both] [--s3]``:
the interleaving explorer for longer than the suite allows; prints how many examples, steps
and distinct interleavings it ran. A violation stops it with hypothesis' shrunk trace of
steps and the blob that reproduces it (exit 1)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import time
from collections import Counter
from collections.abc import Iterator

from tests.explore.backends import DATABASES, STORES, Backend
from tests.explore.machine import KINDS, STATS, explore
from tests.support.services import start_azurite, start_moto, temp_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/explore", description=__doc__)
    parser.add_argument("--minutes", type=float, default=5.0, help="how long (default 5)")
    parser.add_argument("--store", choices=[*STORES, "all"], default="local")
    parser.add_argument("--db", choices=[*DATABASES, "all"], default="sqlite")
    parser.add_argument("--batch", type=int, default=25, help="examples per hypothesis run")
    parser.add_argument("--steps", type=int, default=40, help="steps per example at most")
    parser.add_argument("--retag", choices=["inline", "deferred", "both"], default="both",
                        help="BLOBLEDGER_RETAG (both: half the time each; default)")
    parser.add_argument("--s3", action="store_true",
                        help="documents written only through the S3 endpoint (PutObject, "
                        "DeleteObject), not the ledger's API")
    args = parser.parse_args(argv)
    # A paused sweeper that lost its claims says so at WARNING; expected here, not news.
    logging.getLogger("blobledger").setLevel(logging.ERROR)
    retags = ["inline", "deferred"] if args.retag == "both" else [args.retag]
    combos = [(d, s, r) for d in (DATABASES if args.db == "all" else [args.db])
              for s in (STORES if args.store == "all" else [args.store]) for r in retags]
    seconds = args.minutes * 60 / len(combos)
    started = time.monotonic()
    status = 0
    with temp_dir("blobledger-explore-") as root, _services(combos) as services:
        for db, store, retag in combos:
            backend = Backend(db, store, root / f"{db}-{store}-{retag}",
                              azurite=services.get("azurite"),  # type: ignore[arg-type]
                              moto=services.get("moto"))  # type: ignore[arg-type]
            backend.root.mkdir()
            print(f"exploring {backend.name} (retag {retag}"
                  f"{', S3 endpoint writers' if args.s3 else ''}) for {seconds / 60:g} min",
                  flush=True)
            try:
                explore(backend, seconds=seconds, batch=args.batch, steps=args.steps,
                        on_batch=lambda: print(_progress(started), flush=True), retag=retag,
                        s3_only=args.s3)
            except AssertionError as exc:
                steps = "\n".join(getattr(exc, "__notes__", []))
                print(f"violation on {backend.name} (retag {retag}):\n{exc}\n{steps}",
                      file=sys.stderr)
                status = 1
                break
    print(_summary(started))
    return status


@contextlib.contextmanager
def _services(combos: list[tuple[str, str, str]]) -> Iterator[dict[str, object]]:
    """Azurite and moto's S3, if a combination needs them, for the whole run."""
    stores = {store for _, store, _ in combos}
    started: dict[str, object] = {}
    try:
        if "azure" in stores:
            started["azurite"] = start_azurite()
        if "s3" in stores:
            started["moto"] = start_moto()
        yield started
    finally:
        for service in started.values():
            service.stop()  # type: ignore[attr-defined]


def _progress(started: float) -> str:
    return (f"  {time.monotonic() - started:7.0f}s  examples {STATS.examples}  "
            f"steps {STATS.steps}  distinct interleavings {len(STATS.interleavings)}")


def _summary(started: float) -> str:
    pairs = Counter(pair for sequence in STATS.interleavings for pair in sequence
                    if pair[1] and pair[0] in KINDS)
    return "\n".join([
        f"ran {STATS.examples} examples, {STATS.steps} steps in "
        f"{time.monotonic() - started:.0f}s",
        f"interleavings tried (distinct sequences of (operation, step) and resolver runs): "
        f"{len(STATS.interleavings)}",
        f"distinct (operation, step) suspensions: {len(pairs)}",
        *(["S3 endpoint writers answered: " + ", ".join(
            f"{op} {answer} {n}" for (op, answer), n in sorted(STATS.s3.items()))]
          if STATS.s3 else []),
    ])


if __name__ == "__main__":
    sys.exit(main())
