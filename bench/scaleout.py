"""Scale-out: create throughput through 1, 2 and 4 ``blobledger serve`` processes on one
PostgreSQL database and one Azurite container, each process on a port of its own, the
client spreading 32 concurrent 4 KiB uploads round-robin over them (aiohttp, raw bodies).

The four processes run for the whole case; a trial uses the first 1, 2 or 4 of them (an
idle process costs nothing), and the trials are interleaved. Beside the rate it reports
PostgreSQL's connections to the database, sampled every 20 ms (peak), against the bound the
pools set: each process's engine holds at most ``pool_size + max_overflow`` connections
(``blobledger/db.py``: 10 + 20), so n processes never hold more than 30n. And the CPU
seconds per create of the service processes, Azurite and this client, which say what
limits the scaling on this machine. Runs on loopback and with the largest added round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import uuid
from collections.abc import Iterator

import aiohttp
import asyncpg
from tests.support.server import Server, running_server

from bench.common import Context, Result, cpu_seconds

TITLE = "scale-out: creates/s through 1, 2 and 4 serve processes (PostgreSQL + Azurite)"
PROCESSES = (1, 2, 4)
CONCURRENCY = 32
POOL_BOUND = 10 + 20  # blobledger/db.py: pool_size + max_overflow, per process


async def connection_peak(admin_url: str, database: str, stop: asyncio.Event) -> int:
    """The most connections to ``database`` seen until ``stop`` (this sampler's excluded)."""
    conn = await asyncpg.connect(admin_url)
    peak = 0
    try:
        while not stop.is_set():
            count = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", database)
            peak = max(peak, int(count))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.02)
    finally:
        await conn.close()
    return peak


@contextlib.contextmanager
def servers(ctx: Context, latency_ms: float, n: int) -> Iterator[list[Server]]:
    container = f"scale{uuid.uuid4().hex[:12]}"
    extra = {"BLOBLEDGER_STORE_URL": f"azure://{container}",
             "BLOBLEDGER_AZURE_CONNECTION_STRING": ctx.azure_connection_string(latency_ms)}
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_server(ctx.azurite, ctx.postgres_url, extra=extra))
               for _ in range(n)]


async def run(ctx: Context) -> list[Result]:
    latencies = sorted({0.0, max(ctx.latencies)}) if not ctx.quick else [0.0]
    results: list[Result] = []
    for latency_ms in latencies:
        results += await run_at(ctx, latency_ms)
    return results


async def run_at(ctx: Context, latency_ms: float) -> list[Result]:
    files = 32 if ctx.quick else 400
    counts = PROCESSES[:2] if ctx.quick else PROCESSES  # --quick: 1 and 2 processes
    payload = os.urandom(4096)
    admin_url = ctx.postgres_url.rsplit("/", 1)[0] + "/postgres"
    database = ctx.postgres_url.rsplit("/", 1)[1]
    rates: dict[int, list[float]] = {n: [] for n in counts}
    peaks: dict[int, int] = dict.fromkeys(counts, 0)
    cpu: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    with servers(ctx, latency_ms, max(counts)) as running:
        connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def trial(n: int) -> None:
                used = running[:n]
                queue = iter(range(files))
                tag = uuid.uuid4().hex[:8]

                async def worker(k: int) -> None:
                    url = used[k % n].url
                    for i in queue:
                        async with session.post(f"{url}/documents",
                                                params={"name": f"s-{tag}-{i}.bin"},
                                                data=payload) as response:
                            if response.status != 201:
                                raise RuntimeError(f"create answered {response.status}: "
                                                   f"{(await response.text())[:200]}")

                stop = asyncio.Event()
                sampler = asyncio.create_task(connection_peak(admin_url, database, stop))
                pids = {"serve": [s.process.pid for s in used],
                        "azurite": [ctx.azurite.process.pid], "client": [os.getpid()]}
                before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
                started = time.perf_counter()
                try:
                    await asyncio.gather(*(worker(k) for k in range(CONCURRENCY)))
                finally:
                    elapsed = time.perf_counter() - started
                    stop.set()
                    peaks[n] = max(peaks[n], await sampler)
                after = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
                rates[n].append(files / elapsed)
                cpu[n].append({k: (after[k] - before[k]) / files * 1000 for k in pids})

            for n in counts:  # warm-up: every process's connections and caches
                await trial(n)
            for n in counts:
                rates[n].clear()
                cpu[n].clear()
            for _ in range(ctx.repeats):
                for n in counts:
                    await trial(n)
    one = statistics.median(rates[1])
    results = []
    for n in counts:
        rate = statistics.median(rates[n])
        per = {k: statistics.median(c[k] for c in cpu[n]) for k in cpu[n][0]}
        cpu_text = ", ".join(f"{k} {v:.1f}" for k, v in per.items())
        results.append(Result(
            case=f"scale-out {n} serve", figure_name=f"creates/s through {n} serve processes",
            figure=rate, baseline_name="creates/s through 1 serve process", baseline=one,
            unit="/s", better="higher", target=None, latency_ms=latency_ms,
            detail=f"4 KiB, {CONCURRENCY} concurrent; CPU ms per create: {cpu_text}"))
    bound = POOL_BOUND * max(counts)
    results.append(Result(
        case="scale-out PostgreSQL connections", figure_name="peak connections to the database",
        figure=float(max(peaks.values())),
        baseline_name=f"pool bound of the {max(counts)} processes ({POOL_BOUND} each)",
        baseline=float(bound), unit="", better="lower", target=1.0, latency_ms=latency_ms,
        detail=f"all {max(counts)} processes run through every trial (idle ones keep up "
               "to pool_size = 10 connections each); per trial: "
               + ", ".join(f"{n} serving {peaks[n]}" for n in counts)))
    return results
