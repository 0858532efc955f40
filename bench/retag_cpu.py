"""``python -m bench.retag_cpu --against REV``: this process's CPU per retag of the retag
worker (``BLOBLEDGER_RETAG=deferred``) on Azurite, the working tree's blobledger against an
earlier commit's, in the same run.

Each trial is a child process that imports blobledger from one tree (``PYTHONPATH``, as
``bench.cpu_ab``) and, on the same Azurite (Azure's capabilities: the retag's condition
sent, no read first) and the same PostgreSQL database, makes N owed retags with N creates
of 4 KiB at 16 concurrent (deferred retag, no worker), then times one
``Retagger(ledger).run_once()`` that does them (this process's CPU, ``time.process_time``,
and wall-clock), ``--rounds`` times after a warm-up round. The creates are made in the
child itself, as in ``serve``, where the retag worker runs in the process that made the
uploads. The trees' trials alternate, ``--repeats`` times; the medians of every round are
printed with the load average at each trial's start. ``--profile PATH``: a cProfile (CPU
time) of one more round of the working tree's, as text. Not a case of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

from bench.common import BENCH_ROOT, ab_trees, child_json


async def child(n: int, rounds: int, profile: str | None) -> list[float]:
    """CPU ms per retag of each timed round (this process only)."""
    from bench.create import gather_limited
    from blobledger.config import Settings
    from blobledger.db import Database
    from blobledger.protocol.ledger import Ledger
    from blobledger.stores.azure import AzureStore
    from blobledger.workers.retagger import Retagger

    url, connection = os.environ["AB_DATABASE_URL"], os.environ["AB_AZURE"]
    store = AzureStore(f"rt{uuid.uuid4().hex[:12]}", connection_string=connection)
    ledger = Ledger(Database(url), store,
                    Settings(database_url=url, store_url=store.url).with_(retag="deferred"))
    await ledger.connect()
    store.capabilities = replace(store.capabilities, state_conditioned_transition=True)
    payload = os.urandom(4096)
    result: list[float] = []
    try:
        for round_ in range(rounds + 1 + (1 if profile else 0)):
            tag = uuid.uuid4().hex[:8]

            async def create(i: int, tag: str = tag) -> object:
                return await ledger.create(f"rt-{tag}-{i}.bin", payload,
                                           content_type="application/octet-stream")

            await gather_limited(n, 16, create)
            profiler = cProfile.Profile(time.process_time) if round_ > rounds else None
            started = time.process_time()
            if profiler:
                profiler.enable()
            report = await Retagger(ledger).run_once()
            if profiler:
                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(60)
                Path(profile or "").write_text(text.getvalue())
                continue
            cpu = time.process_time() - started
            assert report.retagged == n, report
            if round_:  # the first round warms connections and caches
                result.append(cpu / n * 1000)
    finally:
        await store._client().delete_container()
        await ledger.close()
    return result


def trial(src: Path, n: int, rounds: int, env: dict[str, str],
          profile: str | None = None) -> list[float]:
    return list(child_json("bench.retag_cpu", src, env, "--n", str(n), "--rounds",
                           str(rounds), *(["--profile", profile] if profile else [])))


async def parent(against: str, n: int, rounds: int, repeats: int, profile: str | None) -> int:
    async with ab_trees(against, "bench-retag-") as (env, trees):
        runs: dict[str, list[float]] = {name: [] for name in trees}
        loads: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(repeats):
            for name, src in trees.items():
                loads[name].append(os.getloadavg()[0])
                runs[name] += trial(src, n, rounds, env)
        if profile:
            trial(BENCH_ROOT / "src", n, rounds, env, profile)
    print(f"CPU ms per retag, this process only, {n} owed retags a round, {rounds} rounds "
          f"a trial, {repeats} trials a tree (median of every round)")
    for name, values in runs.items():
        load = ", ".join(f"{v:.1f}" for v in loads[name])
        print(f"{name[:16]:16} {statistics.median(values):6.3f}  (min {min(values):.3f}, "
              f"max {max(values):.3f}; load {load})")
    old, new = (statistics.median(v) for v in runs.values())
    print(f"{'new / old':16} {new / old:6.2f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retag_cpu")
    parser.add_argument("--against", default="HEAD", help="the commit to compare with")
    parser.add_argument("--n", type=int, default=200, help="owed retags a round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds a trial")
    parser.add_argument("--repeats", type=int, default=3, help="trials a tree")
    parser.add_argument("--profile", help="a cProfile of one working-tree round, to PATH")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.n, args.rounds, args.profile))))
        return 0
    return asyncio.run(parent(args.against, args.n, args.rounds, args.repeats, args.profile))


if __name__ == "__main__":
    sys.exit(main())
