"""``python -m tests.sim --seconds N [--seed S] [--scenario X] [--mutant M | --src-mutant ID]``:
simulated runs from seed S (S, S+1, ...) for N seconds of wall time; prints runs and
simulated operations per second, distinct schedules, the await points preempted at; on a
violation the seed and the trace that replays it (``--seed S --runs 1``), exit 1.

``--mutant`` weakens one fence by a switch of the harness (``MUTANTS``); ``--src-mutant``
applies a mutant of ``scripts/mutate`` (its id) to a temporary copy of ``src/`` and runs the
same search in a process that imports that copy."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.sim.scenarios import MUTANTS, SCENARIOS
from tests.sim.sim import Config, run


def src_mutant(mutant_id: str, argv: list[str]) -> int:
    """The search again, in a process whose ``blobledger`` is a copy of src/ with the
    mutant applied (as scripts/mutate runs its tests)."""
    from tests.mutate.__main__ import environment, mutated_tree
    from tests.mutate.mutants import enumerate_mutants

    root = Path(__file__).resolve().parents[2]
    found = [m for m in enumerate_mutants(root / "src", check=False) if m.id == mutant_id]
    if not found:
        print(f"scripts/simulate: no mutant {mutant_id!r} (scripts/mutate --list)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="blobledger-sim-mutant-") as folder:
        copy = mutated_tree(found[0], Path(folder))
        env = environment(copy)
        env["BLOBLEDGER_SIM_SRC_MUTANT"] = mutant_id
        return subprocess.run([sys.executable, "-m", "tests.sim", *argv], env=env,
                              cwd=root, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="scripts/simulate")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hours", type=float, default=0.0, help="instead of --seconds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=int, default=0, help="stop after this many (0: none)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="default",
                        help="the actor mix and where pauses are aimed")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), default=None,
                        help="weaken one fence (a bug the simulation must find)")
    parser.add_argument("--skew", type=float, default=None,
                        help="each actor's clock off by up to this many seconds either way")
    parser.add_argument("--src-mutant", default=None, metavar="ID",
                        help="a mutant of scripts/mutate, applied to a copy of src/")
    args = parser.parse_args(argv)
    if args.src_mutant:
        rest = [a for i, a in enumerate(argv) if not a.startswith("--src-mutant")
                and (i == 0 or argv[i - 1] != "--src-mutant")]
        return src_mutant(args.src_mutant, rest)
    config = Config(**SCENARIOS[args.scenario], mutant=args.mutant)
    if args.skew is not None:
        config.skew = args.skew
    label = " ".join(filter(None, [
        f"--scenario {args.scenario}" if args.scenario != "default" else "",
        f"--mutant {args.mutant}" if args.mutant else "",
        f"--src-mutant {os.environ['BLOBLEDGER_SIM_SRC_MUTANT']}"
        if os.environ.get("BLOBLEDGER_SIM_SRC_MUTANT") else ""]))
    seconds = args.hours * 3600 or args.seconds
    start = time.monotonic()
    runs = operations = steps = inconclusive = 0
    schedules: set[str] = set()
    preempted: Counter[str] = Counter()
    seed = args.seed
    failure = None
    while time.monotonic() - start < seconds and (not args.runs or runs < args.runs):
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
    print(f"{label or 'default'}: {runs} runs in {elapsed:.1f} s: {runs / elapsed:.2f} runs/s, "
          f"{operations / elapsed:.0f} simulated operations/s "
          f"({steps / elapsed:.0f} scheduling steps/s), {len(schedules)} distinct schedules, "
          f"{inconclusive} inconclusive (SQLite's lock left held by a crashed task)")
    print("await points preempted at (most often first):")
    for point, count in preempted.most_common(15):
        print(f"  {count:7d}  {point}")
    if failure is None:
        return 0
    print(f"\nVIOLATION with seed {failure.seed} {label}: {failure.violation}")
    print(f"found after {runs} runs, {elapsed:.1f} s")
    print(f"replay: scripts/simulate --seed {failure.seed} --runs 1 {label}")
    print("trace:")
    for line in failure.trace:
        print("  " + line)
    return 1


if __name__ == "__main__":
    sys.exit(main())
