"""Sweeping stale intents: the sweeper (claimed batches, Blob Batch deletes of 256) against
the one-by-one loop (load the stale rows, delete each blob in turn, remove the rows), on the
same seeded data (PostgreSQL + Azurite), interleaved. Targets: >= 2.5x the loop's rate on
loopback, >= 20x with 20 ms added per round trip (a batch of 256 deletes is one round trip,
the loop makes one per intent). Seeding goes straight to the service and is not timed."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator
from datetime import timedelta

from sqlalchemy import delete, insert, select

from bench.common import (
    BACKENDS,
    Context,
    Result,
    backend_ledger,
    cpu_seconds,
    interleaved,
    rtt,
)
from blobledger import Ledger
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow, DocumentStatus, utcnow
from blobledger.stores import Store
from blobledger.workers.sweeper import Sweeper

TITLE = "sweep of stale intents: sweeper vs one-by-one loop (PostgreSQL + Azurite)"
PENDING = {"state": "pending"}


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def seed(
    ledger: Ledger, n: int, *, tag: str = "pending", state: str = BlobState.PENDING,
    age: float = 3 * 3600, concurrency: int = 32, store: Store | None = None,
) -> list[str]:
    """``n`` creations ``age`` seconds old (rows in bulk, blobs uploaded concurrently, to
    ``store`` if given: the ledger's container without the added latency)."""
    target = store or ledger.store
    then = utcnow() - timedelta(seconds=age)
    names = [new_blob_name(ledger.settings.blob_prefix, "s.bin") for _ in range(n)]
    docs = [new_document_id() for _ in range(n)]
    status = DocumentStatus.PENDING if state == BlobState.PENDING else DocumentStatus.READY
    async with ledger.db.session() as session:
        for start in range(0, n, 5000):
            part = slice(start, start + 5000)
            await session.execute(insert(DocumentRow), [
                {"id": d, "name": f"bench-{d}", "status": status, "blob_name": b,
                 "version": 1, "content_type": "application/octet-stream",
                 "created_at": then, "updated_at": then}
                for d, b in zip(docs[part], names[part], strict=True)])
            await session.execute(insert(BlobRow), [
                {"name": b, "document_id": d, "kind": "create", "state": state,
                 "content_type": "application/octet-stream", "lease_until": then,
                 "created_at": then, "changed_at": then}
                for d, b in zip(docs[part], names[part], strict=True)])
    queue = iter(names)

    async def upload() -> None:
        for name in queue:
            await target.put(name, _body(b"stale"), tags={"state": tag})

    await asyncio.gather(*(upload() for _ in range(concurrency)))
    return names


async def one_by_one(ledger: Ledger) -> int:
    """The loop the protocol replaces: every stale blob deleted in turn, then the rows."""
    cutoff = ledger.clock() - timedelta(seconds=ledger.settings.sweep_after)
    async with ledger.db.session() as session:
        stale = (await session.execute(select(BlobRow.name, BlobRow.document_id).where(
            BlobRow.state == BlobState.PENDING, BlobRow.changed_at < cutoff))).all()
    for name, _ in stale:
        await ledger.store.delete(name, if_tags=PENDING)
    async with ledger.db.session() as session:
        await session.execute(delete(BlobRow).where(BlobRow.name.in_([n for n, _ in stale])))
        await session.execute(delete(DocumentRow).where(
            DocumentRow.id.in_([d for _, d in stale])))
    return len(stale)


async def run(ctx: Context) -> list[Result]:
    return [await run_on(ctx, kind, ms) for ms in ctx.latencies for kind in BACKENDS]


def count(quick: bool, kind: str, latency_ms: float) -> int:
    if kind == "azure":
        return (300 if quick else 1500) if latency_ms < 20 else (100 if quick else 1000)
    return 100 if quick else 500


async def run_on(ctx: Context, kind: str, latency_ms: float = 0.0) -> Result:
    n = count(ctx.quick, kind, latency_ms)
    counts: dict[str, int] = {}
    elapsed: dict[str, list[float]] = {"sweeper": [], "loop": []}
    server = ctx.azurite.process.pid if kind == "azure" else (
        ctx.moto.process.pid if ctx.moto else 0)
    pids = (os.getpid(), server)
    cpu: dict[str, list[tuple[float, ...]]] = {"sweeper": [], "loop": []}
    async with backend_ledger(ctx, kind, latency_ms) as backend:
        ledger = backend.ledger

        async def sweeper() -> None:
            await seed(ledger, n, store=backend.direct)
            before = [cpu_seconds(p) for p in pids]
            started = time.perf_counter()
            counts["sweeper"] = (await Sweeper(ledger).run_once()).swept
            elapsed["sweeper"].append(time.perf_counter() - started)
            cpu["sweeper"].append(tuple((cpu_seconds(p) - b) / n * 1000
                                        for p, b in zip(pids, before, strict=True)))

        async def loop() -> None:
            await seed(ledger, n, store=backend.direct)
            before = [cpu_seconds(p) for p in pids]
            started = time.perf_counter()
            counts["loop"] = await one_by_one(ledger)
            elapsed["loop"].append(time.perf_counter() - started)
            cpu["loop"].append(tuple((cpu_seconds(p) - b) / n * 1000
                                     for p, b in zip(pids, before, strict=True)))

        await interleaved({"sweeper": sweeper, "loop": loop}, ctx.repeats)
    if counts != {"sweeper": n, "loop": n}:  # e.g. a batch that timed out: the run stopped
        ctx.notes.append(f"sweep{rtt(latency_ms)} on {kind}: swept {counts} of {n} per trial "
                         "(the rest was left for the next run)")
    best = {k: statistics.median(v) for k, v in elapsed.items()}
    per = {k: [statistics.median(c[i] for c in v) for i in range(2)] for k, v in cpu.items()}
    wall = {k: best[k] / n * 1000 for k in best}
    where = "" if kind == "azure" else f" {backend.label}"
    return Result(
        case=f"sweep stale intents{where}", figure_name="sweeper intents/s",
        figure=n / best["sweeper"], baseline_name="one-by-one loop intents/s",
        baseline=n / best["loop"], unit="/s", better="higher",
        target=(20.0 if latency_ms >= 20 else 2.5 if not latency_ms else None)
        if kind == "azure" else None,
        detail=f"{n} intents; sweeper {best['sweeper']:.2f}s, loop {best['loop']:.2f}s "
        "(seeding not timed); ms per intent, wall / CPU of this process + storage server: "
        f"sweeper {wall['sweeper']:.2f} / {per['sweeper'][0]:.2f} + {per['sweeper'][1]:.2f}, "
        f"loop {wall['loop']:.2f} / {per['loop'][0]:.2f} + {per['loop'][1]:.2f}"
        + ("" if kind == "azure" else "; no batch delete on S3: 16 conditional deletes at once"),
        latency_ms=latency_ms)
