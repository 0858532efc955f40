"""The deferred retag (``BLOBLEDGER_RETAG=deferred``): 4 KiB creates at 16 concurrent, the
ledger with the retag inline, the ledger with it deferred, and the naive handler, in the same
run (interleaved), on Azurite (with Azure's own capabilities, as ``bench.create``) and on S3
(moto), at loopback and at each added latency.

Deferred, a create is C1, the upload, C4 (one storage round trip, two commits); the retag
worker does the retags beside it, as in ``serve``: it runs during the trial, woken by each
C4. The figure is what clients see: creates acknowledged per second while the worker runs
beside them. The detail gives the same with the time to drain every retag the trial left
owed counted in (the retag's work included: the throughput the machine sustains), each
one's CPU per create (this process and the storage server, the drain included) and the
largest lag the worker let build up.

Targets (deferred vs naive): >= 0.85x at 20 ms, >= 0.6x at loopback (Azure's; moto's costs
are not S3's, so its rows carry no target).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

from sqlalchemy import insert

from bench.common import (
    BACKENDS,
    Backend,
    Context,
    Result,
    backend_ledger,
    cpu_seconds,
    interleaved,
)
from bench.create import gather_limited, naive_table
from blobledger.workers.retagger import Retagger, retag_forever

TITLE = "deferred retag: 4 KiB c16 creates, inline vs deferred vs the naive handler"
KIB = 1024
SIZE, CONCURRENCY = 4 * KIB, 16


def files(quick: bool) -> int:
    return 64 if quick else 200


async def measure(ctx: Context, backend: Backend) -> list[Result]:
    ledger, db, raw_put = backend.ledger, backend.ledger.db, backend.raw_put
    payload = os.urandom(SIZE)
    n = files(ctx.quick)
    inline_settings = ledger.settings
    deferred_settings = ledger.settings.with_(retag="deferred")
    lags: list[float] = []
    #: deferred: (seconds until every create was acknowledged, seconds until every retag)
    spans: list[tuple[float, float]] = []

    async def creates() -> None:
        tag = uuid.uuid4().hex[:8]
        await gather_limited(n, CONCURRENCY, lambda i: ledger.create(
            f"r-{tag}-{i}.bin", payload, content_type="application/octet-stream"))

    async def inline_trial() -> None:
        ledger.settings = inline_settings
        await creates()

    async def deferred_trial() -> None:
        ledger.settings = deferred_settings
        stop = asyncio.Event()
        worker = asyncio.create_task(retag_forever(ledger, interval=1.0, stop=stop))
        started = time.perf_counter()
        try:
            await creates()
            acked = time.perf_counter() - started
            lags.append(await ledger.transitions.retag_lag())
            stop.set()
            ledger.retag_owed.set()
            await worker
            while (await Retagger(ledger).run_once()).retagged:  # every owed retag done
                pass
            spans.append((acked, time.perf_counter() - started))
        finally:
            stop.set()
            ledger.settings = inline_settings

    async def naive_trial() -> None:
        tag = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            blob_name = f"naive/{uuid.uuid4().hex}.bin"
            await raw_put(blob_name, payload)
            async with db.session() as session:
                await session.execute(insert(naive_table).values(
                    name=f"rn-{tag}-{i}.bin", blob_name=blob_name))

        await gather_limited(n, CONCURRENCY, one)

    emulated = ledger.store.capabilities if backend.kind == "azure" else None

    def as_service(trial: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """On Azurite: the ledger as against Azure (the retag's condition sent, no read)."""
        if emulated is None:
            return trial

        async def run() -> None:
            ledger.store.capabilities = replace(emulated, state_conditioned_transition=True)
            try:
                await trial()
            finally:
                ledger.store.capabilities = emulated
        return run

    server = ctx.azurite.process.pid if backend.kind == "azure" else (
        ctx.moto.process.pid if ctx.moto else 0)
    cpu: dict[str, list[tuple[float, float]]] = {}

    def counted(name: str, trial: Callable[[], Awaitable[None]]
                ) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            mine, theirs = cpu_seconds(os.getpid()), cpu_seconds(server)
            await trial()
            cpu.setdefault(name, []).append(((cpu_seconds(os.getpid()) - mine) / n * 1000,
                                             (cpu_seconds(server) - theirs) / n * 1000))
        return run

    trials: dict[str, Callable[[], Awaitable[object]]] = {
        "inline": counted("inline", as_service(inline_trial)),
        "deferred": counted("deferred", as_service(deferred_trial)),
        "naive": counted("naive", naive_trial)}
    await trials["deferred"]()  # warm-up: connections, caches
    await trials["inline"]()
    cpu.clear()
    lags.clear()
    spans.clear()
    times = await interleaved(trials, ctx.repeats)
    times["deferred"] = statistics.median(a for a, _ in spans)  # acknowledged
    rate = {k: n / v for k, v in times.items()}
    drained = n / statistics.median(t for _, t in spans)
    ms = {k: (statistics.median(c for c, _ in v), statistics.median(s for _, s in v))
          for k, v in cpu.items()}
    where = "" if backend.kind == "azure" else f" {backend.label}"
    cpu_text = ", ".join(f"{k} {ms[k][0]:.1f} + {ms[k][1]:.1f}" for k in trials)
    detail = (f"CPU ms per create, this process + storage server: {cpu_text}; largest retag "
              f"lag at a trial's end {max(lags, default=0.0):.2f} s")
    if backend.kind != "azure":
        targets: dict[str, float | None] = {"inline": None, "deferred": None}
    else:
        targets = {"inline": None,
                   "deferred": 0.85 if backend.latency_ms >= 20 else (
                       0.6 if not backend.latency_ms else None)}
    return [Result(
        case=f"create 4 KiB c16 retag {way}{where}", figure_name=f"ledger creates/s ({way})",
        figure=rate[way], baseline_name="naive upload-then-insert creates/s",
        baseline=rate["naive"], unit="/s", better="higher", target=targets[way],
        detail=(f"deferred/inline {rate['deferred'] / rate['inline']:.2f}x; with every "
                f"owed retag drained {drained:.1f}/s, {drained / rate['naive']:.2f}x naive; "
                + detail if way == "deferred" else detail),
        latency_ms=backend.latency_ms) for way in ("inline", "deferred")]


async def run(ctx: Context) -> list[Result]:
    results = []
    for latency_ms in ctx.latencies:
        for kind in BACKENDS:
            async with backend_ledger(ctx, kind, latency_ms) as backend:
                async with backend.ledger.db.engine.begin() as conn:
                    await conn.run_sync(naive_table.metadata.create_all)
                results += await measure(ctx, backend)
    return results
