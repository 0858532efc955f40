"""``python -m bench.cpu_ab --against REV``: this process's CPU per 4 KiB create, the working
tree's blobledger against an earlier commit's, in the same run.

Each trial is a child process that imports blobledger from one tree (``PYTHONPATH``: the
working tree's ``src``, or a ``git worktree`` of ``REV`` made for the run and removed after)
and runs, on the same Azurite (Azure's capabilities, as ``bench.create``) and the same
PostgreSQL database, N creates at 16 concurrent with the retag deferred and inline (the
writer's path only: no retag worker), and the naive handler (upload, then one insert) as the
yardstick. It reports the child's own CPU (``time.process_time``) per create. The trees'
trials alternate, ``--repeats`` times; the medians are printed with their ratios. Not a case
of ``python -m bench``: it compares code, not the ledger with its baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

from bench.common import ab_trees, child_json

KINDS = ("deferred", "inline", "naive")


async def child(n: int) -> dict[str, float]:
    """One tree's trial: CPU ms per create for each kind (this process only)."""
    from sqlalchemy import insert

    from bench.create import gather_limited, naive_table
    from blobledger.config import Settings
    from blobledger.db import Database
    from blobledger.protocol.ledger import Ledger
    from blobledger.stores.azure import AzureStore

    url, connection = os.environ["AB_DATABASE_URL"], os.environ["AB_AZURE"]
    store = AzureStore(f"ab{uuid.uuid4().hex[:12]}", connection_string=connection)
    ledger = Ledger(Database(url), store, Settings(database_url=url, store_url=store.url))
    await ledger.connect()
    store.capabilities = replace(store.capabilities, state_conditioned_transition=True)
    async with ledger.db.engine.begin() as conn:
        await conn.run_sync(naive_table.metadata.create_all, tables=[naive_table])
    payload = os.urandom(4096)
    client = store._client()

    async def creates(kind: str) -> None:
        tag = uuid.uuid4().hex[:8]
        if kind == "naive":
            async def one(i: int) -> None:
                name = f"naive/{uuid.uuid4().hex}.bin"
                await client.upload_blob(name, payload)
                async with ledger.db.session() as session:
                    await session.execute(insert(naive_table).values(
                        name=f"n-{tag}-{i}.bin", blob_name=name))
            await gather_limited(n, 16, one)
            return
        ledger.settings = ledger.settings.with_(retag=kind)
        await gather_limited(n, 16, lambda i: ledger.create(
            f"{kind}-{tag}-{i}.bin", payload, content_type="application/octet-stream"))

    result: dict[str, float] = {}
    try:
        for kind in KINDS:
            await creates(kind)  # warm: connections, statement caches
            started = time.process_time()
            await creates(kind)
            result[kind] = (time.process_time() - started) / n * 1000
    finally:
        await client.delete_container()
        await ledger.close()
    return result


def trial(src: Path, n: int, env: dict[str, str]) -> dict[str, float]:
    return dict(child_json("bench.cpu_ab", src, env, "--n", str(n)))


async def parent(against: str, n: int, repeats: int) -> int:
    async with ab_trees(against, "bench-ab-") as (env, trees):
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(repeats):
            for name, src in trees.items():
                runs[name].append(trial(src, n, env))
    medians = {name: {k: statistics.median(r[k] for r in rs) for k in KINDS}
               for name, rs in runs.items()}
    print(f"CPU ms per 4 KiB create, this process only, c16, {n} creates, median of "
          f"{repeats} (load {os.getloadavg()[0]:.1f})")
    print(f"{'':16}" + "".join(f"{k:>12}" for k in KINDS))
    for name, values in medians.items():
        print(f"{name[:16]:16}" + "".join(f"{values[k]:>12.2f}" for k in KINDS))
    old, new = medians[against], medians["working tree"]
    print(f"{'new / old':16}" + "".join(f"{new[k] / old[k]:>11.2f}x" for k in KINDS))
    print(f"{'naive / new':16}" + "".join(f"{new['naive'] / new[k]:>11.2f}x" for k in KINDS))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_ab")
    parser.add_argument("--against", default="HEAD", help="the commit to compare with")
    parser.add_argument("--n", type=int, default=400, help="creates per trial and kind")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.n))))
        return 0
    return asyncio.run(parent(args.against, args.n, args.repeats))


if __name__ == "__main__":
    sys.exit(main())
