"""``python -m tests.sim --seconds N [--seed S] [--mutant M]``: simulated runs from seed S
(S, S+1, ...) for N seconds of wall time; prints runs and simulated operations per second,
distinct schedules, the await points preempted at; on a violation the seed and the trace
that replays it (``--seed S --runs 1``), exit 1."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.sim.sim import MUTANTS, Config, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/simulate")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=0, help="stop after this many (0: none)")
    parser.add_argument("--mutant", choices=MUTANTS, default=None,
                        help="weaken one fence (a bug the simulation must find)")
    args = parser.parse_args(argv)
    config = Config(mutant=args.mutant)
    start = time.monotonic()
    runs = operations = steps = inconclusive = 0
    schedules: set[str] = set()
    preempted: Counter[str] = Counter()
    seed = args.seed
    failure = None
    while time.monotonic() - start < args.seconds and (not args.runs or runs < args.runs):
        result = run(seed, config)
        runs += 1
        operations += result.operations
        steps += result.steps
        schedules.add(result.schedule())
        preempted.update(result.preempted)
        inconclusive += result.inconclusive is not None
        if result.violation is not None:
            failure = result
            break
        seed += 1
    elapsed = time.monotonic() - start
    print(f"{runs} runs in {elapsed:.1f} s: {runs / elapsed:.2f} runs/s, "
          f"{operations / elapsed:.0f} simulated operations/s "
          f"({steps / elapsed:.0f} scheduling steps/s), {len(schedules)} distinct schedules, "
          f"{inconclusive} inconclusive (SQLite's lock left held by a crashed task)")
    print("await points preempted at (most often first):")
    for point, count in preempted.most_common(15):
        print(f"  {count:7d}  {point}")
    if failure is None:
        return 0
    print(f"\nVIOLATION with seed {failure.seed}"
          f"{' (mutant ' + args.mutant + ')' if args.mutant else ''}: {failure.violation}")
    print(f"replay: scripts/simulate --seed {failure.seed} --runs 1"
          f"{' --mutant ' + args.mutant if args.mutant else ''}")
    print("trace:")
    for line in failure.trace:
        print("  " + line)
    return 1


if __name__ == "__main__":
    sys.exit(main())
