"""``python -m bench.profile_create --backend pg-azure``: where a 4 KiB create's cost goes,
on the writer's path (deferred retag, no retag worker), beside the naive handler (upload,
then one insert) in the same run.

Reported per create, for the ledger and the naive handler:

- this process's CPU (``time.process_time``, all its threads), N creates at 16 concurrent,
  the two alternating ``--repeats`` times (medians): what the machine's load inflates least
  (``--size``, ``--concurrency``: other sizes; wall-clock per create is printed beside it,
  which the load does inflate);
- the database's statements and commits (SQLAlchemy's events: every statement the driver
  runs, BEGIN included, and every COMMIT), and on PostgreSQL its round trips: the server's
  answers counted by a TCP proxy in front of it (one per round trip: asyncpg waits for each),
  creates one at a time through it;
- on SQLite, in place of round trips, aiosqlite's trips to the connection's thread (each
  driver call: a cursor, a statement, its rows, a cursor's close, a COMMIT, a ROLLBACK);
- the storage requests (every HTTP request this process's aiohttp sessions send; the
  local-disk store makes none).

``--profile PATH``: a cProfile of one ledger trial (N creates at 16 concurrent), its top
functions by cumulative time, as text. Not a case of ``python -m bench``: it measures the
ledger's own path, with no target.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from sqlalchemy import event, insert
from sqlalchemy.engine import make_url

from bench.create import gather_limited, naive_table
from bench.fence_cost import DelayingProxy
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.stores import Store

BACKENDS = ("sqlite-local", "pg-azure", "pg-s3")
KIB = 1024


@dataclass
class Counters:
    statements: int = 0
    commits: int = 0
    requests: int = 0
    #: aiosqlite's trips to a connection's thread (every driver call on SQLite is one)
    trips: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


COUNT = Counters()


def _count_requests() -> None:
    """Every HTTP request of this process's aiohttp sessions (both SDKs use aiohttp)."""
    original = aiohttp.ClientSession._request

    async def counted(self: aiohttp.ClientSession, method: str, url: Any, *args: Any,
                      **kwargs: Any) -> Any:
        COUNT.requests += 1
        COUNT.kinds[method] = COUNT.kinds.get(method, 0) + 1
        return await original(self, method, url, *args, **kwargs)

    aiohttp.ClientSession._request = counted  # type: ignore[method-assign,assignment]


def _count_trips() -> None:
    import aiosqlite.core

    original = aiosqlite.core.Connection._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        COUNT.trips += 1
        return await original(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    aiosqlite.core.Connection._execute = counted  # type: ignore[method-assign]


def _count_statements(db: Database) -> None:
    """Statements and commits through the engine's events. A listener makes the engine's
    execution observed (``Database.observed``): C1 and C4 then go through SQLAlchemy, not on
    the driver (the same statements and round trips, so the same counts), which is why the
    CPU trials' rig has no listener."""
    sync = db.engine.sync_engine

    @event.listens_for(sync, "before_cursor_execute")
    def _statement(_conn: Any, _cursor: Any, _sql: str, params: Any, _context: Any,
                   executemany: bool) -> None:
        # one per run: a group commit's batch is one executemany of all its runs
        COUNT.statements += len(params) if executemany else 1

    @event.listens_for(sync, "commit")
    def _commit(*_: Any) -> None:
        COUNT.commits += 1


@dataclass
class Rig:
    ledger: Ledger
    put: Callable[[str, bytes], Awaitable[object]]


@asynccontextmanager
async def rig(backend: str, database: str) -> AsyncIterator[Rig]:
    """A ledger (deferred retag) and the naive handler's put on ``backend``."""
    from tests.support.services import start_azurite, start_moto

    store: Store
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as root:
        stop: Callable[[], None] = lambda: None  # noqa: E731
        if backend == "sqlite-local":
            from blobledger.stores.local import LocalStore

            disk = LocalStore(os.path.join(root, "store"))
            store = disk

            async def put(name: str, data: bytes) -> object:
                async def one() -> AsyncIterator[bytes]:
                    yield data
                return await disk.put(name, one(), tags={})
        elif backend == "pg-azure":
            from blobledger.stores.azure import AzureStore

            azurite = start_azurite()
            stop = azurite.stop
            azure = AzureStore(f"p{uuid.uuid4().hex[:12]}",
                               connection_string=azurite.connection_string)
            store = azure

            async def put(name: str, data: bytes) -> object:
                return await azure._client().upload_blob(name, data)
        else:
            moto = start_moto()
            stop = moto.stop
            s3 = moto.store()
            store = s3

            async def put(name: str, data: bytes) -> object:
                client = await s3._client()
                return await client.put_object(Bucket=s3.bucket, Key=name, Body=data)
        if backend == "sqlite-local":
            database = f"sqlite+aiosqlite:///{root}/ledger.db"
        settings = Settings(database_url=database, store_url=store.url).with_(
            retag="deferred")
        ledger = Ledger(Database(database), store, settings)
        try:
            await ledger.connect()
            if backend == "pg-azure":  # as against Azure: the retag's condition sent
                store.capabilities = replace(store.capabilities,
                                             state_conditioned_transition=True)
            async with ledger.db.engine.begin() as conn:
                await conn.run_sync(naive_table.metadata.create_all, tables=[naive_table])
            yield Rig(ledger, put)
        finally:
            await ledger.close()
            stop()


def trials(r: Rig, payload: bytes) -> dict[str, Callable[[int, int], Awaitable[None]]]:
    async def ledger(n: int, concurrency: int) -> None:
        tag = uuid.uuid4().hex[:8]
        await gather_limited(n, concurrency, lambda i: r.ledger.create(
            f"l-{tag}-{i}.bin", payload, content_type="application/octet-stream"))

    async def naive(n: int, concurrency: int) -> None:
        tag = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            name = f"naive/{uuid.uuid4().hex}.bin"
            await r.put(name, payload)
            async with r.ledger.db.session() as session:
                await session.execute(insert(naive_table).values(
                    name=f"n-{tag}-{i}.bin", blob_name=name))

        await gather_limited(n, concurrency, one)

    return {"ledger": ledger, "naive": naive}


async def counts(r: Rig, runs: dict[str, Callable[[int, int], Awaitable[None]]], n: int,
                 proxy: DelayingProxy | None) -> dict[str, dict[str, float]]:
    """Statements, commits, round trips and storage requests per create, one at a time."""
    found: dict[str, dict[str, float]] = {}
    for name, run in runs.items():
        before = replace(COUNT, kinds=dict(COUNT.kinds))
        answers = proxy.answers if proxy else 0
        await run(n, 1)
        found[name] = {
            "statements": (COUNT.statements - before.statements) / n,
            "commits": (COUNT.commits - before.commits) / n,
            "requests": (COUNT.requests - before.requests) / n,
            "round trips": ((proxy.answers - answers) / n) if proxy else
            (COUNT.trips - before.trips) / n,
        }
    return found


async def main_async(args: argparse.Namespace) -> int:
    from tests.support.services import create_database, drop_database

    _count_requests()
    _count_trips()
    pg = args.backend != "sqlite-local"
    database = await create_database() if pg else ""
    payload = os.urandom(args.size * KIB)
    try:
        async with rig(args.backend, database) as r:  # no listener: the driver's path
            runs = trials(r, payload)
            for run in runs.values():  # warm: connections, statement caches
                await run(min(64, args.n), args.concurrency)
            cpu: dict[str, list[float]] = {k: [] for k in runs}
            wall: dict[str, list[float]] = {k: [] for k in runs}
            for _ in range(args.repeats):
                for name, run in runs.items():
                    started, clock = time.process_time(), time.perf_counter()
                    await run(args.n, args.concurrency)
                    cpu[name].append((time.process_time() - started) / args.n * 1000)
                    wall[name].append((time.perf_counter() - clock) / args.n * 1000)
            grouped = _grouped(r.ledger)
            if args.profile:
                profiler = cProfile.Profile(time.process_time)  # CPU, not the load
                profiler.enable()
                await runs["ledger"](args.n, args.concurrency)
                profiler.disable()
                if args.dump:
                    profiler.dump_stats(args.dump)
                text = io.StringIO()
                stats = pstats.Stats(profiler, stream=text)
                stats.sort_stats("cumulative").print_stats(args.top)
                stats.sort_stats("tottime").print_stats(args.top)
                with open(args.profile, "w") as out:
                    out.write(f"# python -m bench.profile_create --backend {args.backend} "
                              f"--n {args.n}: one ledger trial under cProfile, CPU time ({args.n} "
                              f"creates of {args.size} KiB at {args.concurrency} concurrent, "
                              "deferred retag, writer's path)\n")
                    out.write("\n".join(line.rstrip() for line in text.getvalue()
                                        .replace(os.getcwd() + "/", "").splitlines()) + "\n")
        # round trips: through a counting proxy in front of PostgreSQL, one create at a time
        async with _counted_rig(args.backend, database) as (r2, proxy):
            _count_statements(r2.ledger.db)
            runs2 = trials(r2, payload)
            for run in runs2.values():
                await run(min(8, args.n), 1)
            per = await counts(r2, runs2, min(40, args.n), proxy)
    finally:
        if pg:
            await drop_database(database)
    medians = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"group commit at c{args.concurrency}, statements per round trip: {grouped}")
    print(f"{args.backend}: {args.size} KiB creates, deferred retag, writer's path; CPU at "
          f"c{args.concurrency}"
          f" ({args.n} per trial, median of {args.repeats}); counts one at a time "
          f"(load {os.getloadavg()[0]:.1f})")
    trips = "DB RTs" if pg else "trips"
    print(f"{'':8}{'CPU ms':>8}{'wall ms':>9}{'stmts':>8}{'commits':>8}{trips:>8}"
          f"{'store req':>10}")
    for name in runs:
        c = per[name]
        print(f"{name:8}{medians[name]:>8.2f}{statistics.median(wall[name]):>9.1f}"
              f"{c['statements']:>8.2f}{c['commits']:>8.2f}{c['round trips']:>8.2f}"
              f"{c['requests']:>10.2f}")
    print(f"ledger / naive CPU: {medians['ledger'] / medians['naive']:.2f}x "
          f"(trials: ledger {', '.join(f'{v:.2f}' for v in cpu['ledger'])}; naive "
          f"{', '.join(f'{v:.2f}' for v in cpu['naive'])})")
    return 0


def _grouped(ledger: Ledger) -> str:
    """C1's and C4's runs per round trip over the whole run (group commit,
    ``protocol/group.py``; "none" where the tree has no group commit), and the share of the
    runs sent alone (one statement on its own round trip)."""
    found = []
    for step in ("c1", "c4"):
        sizes: dict[int, int] = getattr(getattr(ledger.transitions, f"_{step}s", None),
                                        "sizes", {})
        trips = sum(sizes.values())
        runs = sum(size * count for size, count in sizes.items())
        found.append(f"{step.upper()} {runs / trips:.2f} ({sizes.get(1, 0) / runs:.0%} of runs "
                     "alone)" if trips else f"{step.upper()} none")
    return ", ".join(found)


@asynccontextmanager
async def _counted_rig(backend: str, database: str
                       ) -> AsyncIterator[tuple[Rig, DelayingProxy | None]]:
    if backend == "sqlite-local":
        async with rig(backend, database) as r:
            yield r, None
        return
    url = make_url(database)
    with DelayingProxy(url.port or 5432, 0.0) as proxy:
        through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False)
        async with rig(backend, through) as r:
            yield r, proxy


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_create")
    parser.add_argument("--backend", choices=BACKENDS, default="pg-azure")
    parser.add_argument("--n", type=int, default=300, help="creates per CPU trial")
    parser.add_argument("--size", type=int, default=4, help="KiB per document (default 4)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", metavar="PATH", help="cProfile a ledger trial to PATH")
    parser.add_argument("--dump", metavar="PATH", help="the raw cProfile stats to PATH")
    parser.add_argument("--top", type=int, default=30, help="functions listed per sort")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
