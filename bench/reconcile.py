"""Reconciling a container of 20,000 blobs (2,000 with --quick) against its table, run as
``blobledger reconcile`` in a subprocess (its own timing and its peak RSS), against a bare
``list_blobs(include=["tags"])`` of the same container. Targets: <= 1.3x the listing's
time, < 100 MiB peak RSS, on loopback and with every added round-trip time (both sides
through the same delaying proxy; the container is seeded straight, untimed). The
uncommitted-blocks check is measured apart (see detail), on loopback only: it is one request
per blob."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Context, Result, azure_ledger
from bench.sweep import seed
from blobledger.protocol.models import BlobState
from blobledger.stores.azure import AzureStore

TITLE = "reconcile: streaming merge vs a bare tagged listing, and its peak RSS"
BLOBLEDGER = str(Path(sys.executable).with_name("blobledger"))


def high_water_mib(pid: int) -> float:
    """The process's own peak RSS (VmHWM: per address space, so reset by its exec)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0.0


def reconcile_process(env: dict[str, str], *args: str) -> tuple[float, float]:
    """(seconds the reconcile reported, peak RSS in MiB) of one ``blobledger reconcile``.

    The peak is the child's VmHWM, polled until it exits. (wait4's ru_maxrss would not do:
    it keeps the high-water mark of the address space the child had before its exec, and a
    forked or vforked child starts from this large process's.)"""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([BLOBLEDGER, "reconcile", "--json", *args], env=env,
                                   stdout=out, stderr=err)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, high_water_mib(process.pid))
            time.sleep(0.01)
        out.seek(0)
        err.seek(0)
        lines = out.read().decode().strip().splitlines()
        if not lines:
            raise RuntimeError(f"reconcile printed nothing: {err.read().decode()[:300]}")
        summary = json.loads(lines[-1])
        if summary["exit_code"] != 0:
            raise RuntimeError(f"reconcile found problems: {summary}")
    return float(summary["seconds"]), peak


async def run(ctx: Context) -> list[Result]:
    n = 2000 if ctx.quick else 20000
    results: list[Result] = []
    async with azure_ledger(ctx) as (ledger, store):
        await seed(ledger, n, tag="committed", state=BlobState.COMMITTED, concurrency=48)
        for latency_ms in ctx.latencies:
            results += await measure(ctx, store, n, latency_ms)
    return results


async def measure(ctx: Context, seeded: AzureStore, n: int, latency_ms: float) -> list[Result]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(BLOBLEDGER_DATABASE_URL=ctx.postgres_url,
               BLOBLEDGER_STORE_URL=seeded.url,
               BLOBLEDGER_AZURE_CONNECTION_STRING=ctx.azure_connection_string(latency_ms))
    store = AzureStore(seeded.container_name,
                       connection_string=ctx.azure_connection_string(latency_ms))
    try:
        client = store._client()

        async def bare() -> float:
            started = time.perf_counter()
            count = 0
            async for _ in client.list_blobs(include=["tags"]):
                count += 1
            assert count == n
            return time.perf_counter() - started

        merge: list[float] = []
        listing: list[float] = []
        rss: list[float] = []
        for _ in range(ctx.repeats):
            listing.append(await bare())
            seconds, peak = await asyncio.to_thread(reconcile_process, env, "--no-blocks")
            merge.append(seconds)
            rss.append(peak)
        blocks_detail = ""
        if not latency_ms:
            blocks, blocks_rss = await asyncio.to_thread(reconcile_process, env)
            rss.append(blocks_rss)
            blocks_detail = (f"; with the uncommitted-blocks check {blocks:.2f}s "
                             f"({blocks / statistics.median(listing):.1f}x, one block-list "
                             "request per blob)")
    finally:
        await store.close()
    merge_s, listing_s = statistics.median(merge), statistics.median(listing)
    results = [
        Result(case=f"reconcile {n} blobs", figure_name="reconcile merge seconds",
               figure=merge_s, baseline_name="bare list_blobs(include=tags) seconds",
               baseline=listing_s, unit="s", better="lower", target=1.3,
               detail="both list pages of 5,000 (the service's maximum); reconcile reads "
                      "them without the SDK's models" + blocks_detail, latency_ms=latency_ms)]
    if not latency_ms:
        results.append(Result(
            case=f"reconcile {n} blobs peak RSS", figure_name="peak RSS MiB",
            figure=max(rss), baseline_name="limit MiB", baseline=100.0,
            unit="MiB", better="lower", target=1.0,
            detail="max over the runs, the subprocess's VmHWM"))
    return results
