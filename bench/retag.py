"""The deferred retag (``BLOBLEDGER_RETAG=deferred``): creates with the retag inline, the
same ledger with it deferred, and the naive handler, in the same run (interleaved): 4 KiB
at 16 concurrent on Azurite (with Azure's own capabilities, as ``bench.create``) and on S3
(moto), at loopback and at each added latency; 64 MiB at 1 and 16 concurrent (below).

Deferred, a create is C1, the upload, C4 (one storage round trip, two commits); the retag
worker does the retags beside it, as in ``serve``: it runs during the trial, woken by each
C4. The figure is what clients see: creates acknowledged per second while the worker runs
beside them. The detail gives the same with the time to drain every retag the trial left
owed counted in (the retag's work included: the throughput the machine sustains), each
one's CPU per create (this process and the storage server, the drain included) and the
largest lag the worker let build up.

The 4 KiB trials are ten times 200 creates (``--scale``; 64 with ``--quick``): the retag
worker lingers a second after a C4 before it claims, so a trial of a fraction of a second
would end before the worker's first claim and show the creates without the retags' work
beside them (1.25x the naive handler at loopback on an idle machine, where ten times the
creates give 0.83x).

Targets (deferred vs naive) at 4 KiB c16: >= 0.85x at 20 ms, >= 0.6x at loopback (Azure's;
moto's costs are not S3's, so its rows carry no target); 2 ms is measured without one. At
20 ms, 4 KiB at 2 concurrent too (no target): sixteen creates in flight at 20 ms keep this
two-core machine's CPU busy (the emulator's included), two do not, so that row shows what
the round trips cost where the CPU is not the limit, as against a cloud service.

64 MiB at 1 and 16 concurrent (loopback only: bandwidth, not round trips, bounds them), on
Azurite, moto's S3 and the local-disk store: deferred >= 0.95x the naive handler on every
one (inline on Azurite too, as ``bench.create``). On the disk the store's writes run in
this process's threads (no server: its CPU column is 0). The detail gives each trial's
cores busy (CPU seconds over wall seconds) for this process and the storage server, so a
server pinned at one core (Azurite is one Node thread) shows as the limit. moto keeps every
byte in memory: the bucket is emptied after each 64 MiB trial, untimed.
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
)
from bench.common import empty_bucket as common_empty_bucket
from bench.create import gather_limited, naive_table
from blobledger.workers.retagger import Retagger, retag_forever

TITLE = ("deferred retag: 4 KiB c16 and 64 MiB c1/c16 creates, inline vs deferred vs the naive "
         "handler")
KIB, MIB = 1024, 1024 * 1024


def plan(quick: bool, kind: str, latency_ms: float, scale: int = 1
         ) -> list[tuple[int, int, int]]:
    """(size, concurrency, files per trial) for one backend at one added latency; the 4 KiB
    trials' files times ``scale`` (``--scale``)."""
    small = [] if kind == "local" else [(4 * KIB, 16, (64 if quick else 200) * scale)]
    if latency_ms >= 20 and kind != "local":  # where this machine's CPU is not the limit
        small.append((4 * KIB, 2, (20 if quick else 100) * scale))
    if latency_ms:
        return small
    if quick:
        return [*small, (1 * MIB, 1, 2), (1 * MIB, 16, 16)]
    return [*small, (64 * MIB, 1, 2), (64 * MIB, 16, 16)]


def kinds(latency_ms: float) -> tuple[str, ...]:
    return (*BACKENDS, "local") if not latency_ms else BACKENDS


async def measure(ctx: Context, backend: Backend, size: int, concurrency: int,
                  n: int) -> list[Result]:
    ledger, db, raw_put = backend.ledger, backend.ledger.db, backend.raw_put
    payload = os.urandom(size)
    inline_settings = ledger.settings
    deferred_settings = ledger.settings.with_(retag="deferred")
    lags: list[float] = []
    #: deferred: (seconds until every create was acknowledged, seconds until every retag)
    spans: list[tuple[float, float]] = []

    async def creates() -> None:
        tag = uuid.uuid4().hex[:8]
        await gather_limited(n, concurrency, lambda i: ledger.create(
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

        await gather_limited(n, concurrency, one)

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
    #: the latency proxy in front of the server (its own process), when latency is added
    proxy = (ctx.proxies[backend.kind, backend.latency_ms].process.pid
             if backend.latency_ms else 0)
    cpu: dict[str, list[tuple[float, float]]] = {}
    #: cores busy over each trial (CPU seconds / wall seconds): this process, the server
    busy: dict[str, list[tuple[float, float]]] = {}
    #: the latency proxy's CPU ms per create
    relayed: dict[str, list[float]] = {}

    def counted(name: str, trial: Callable[[], Awaitable[None]]
                ) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            mine, theirs = cpu_seconds(os.getpid()), cpu_seconds(server)
            relay = cpu_seconds(proxy) if proxy else 0.0
            started = time.perf_counter()
            await trial()
            wall = time.perf_counter() - started
            mine, theirs = cpu_seconds(os.getpid()) - mine, cpu_seconds(server) - theirs
            if proxy:
                relayed.setdefault(name, []).append((cpu_seconds(proxy) - relay) / n * 1000)
            cpu.setdefault(name, []).append((mine / n * 1000, theirs / n * 1000))
            busy.setdefault(name, []).append((mine / wall, theirs / wall))
        return run

    async def empty_bucket() -> None:
        """moto holds every byte in its memory: the 64 MiB trials' objects go, untimed."""
        if backend.kind != "s3" or size < MIB:
            return
        await common_empty_bucket(backend)

    def then_emptied(trial: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[float]]:
        async def run() -> float:
            started = time.perf_counter()
            await trial()
            took = time.perf_counter() - started
            await empty_bucket()
            return took
        return run

    trials: dict[str, Callable[[], Awaitable[object]]] = {
        "inline": counted("inline", as_service(inline_trial)),
        "deferred": counted("deferred", as_service(deferred_trial)),
        "naive": counted("naive", naive_trial)}
    await trials["deferred"]()  # warm-up: connections, caches
    await trials["inline"]()
    await empty_bucket()
    cpu.clear()
    busy.clear()
    lags.clear()
    spans.clear()
    timed = {name: then_emptied(trial) for name, trial in trials.items()}
    took: dict[str, list[float]] = {name: [] for name in trials}
    for _ in range(ctx.repeats):  # interleaved, each trial's own time only (not the emptying)
        for name, trial in timed.items():
            took[name].append(await trial())
    times = {name: statistics.median(values) for name, values in took.items()}
    times["deferred"] = statistics.median(a for a, _ in spans)  # acknowledged
    rate = {k: n / v for k, v in times.items()}
    drained = n / statistics.median(t for _, t in spans)
    ms = {k: (statistics.median(c for c, _ in v), statistics.median(s for _, s in v))
          for k, v in cpu.items()}
    where = "" if backend.kind == "azure" else f" {backend.label}"
    cores = {k: (statistics.median(c for c, _ in v), statistics.median(s for _, s in v))
             for k, v in busy.items()}
    cpu_text = ", ".join(f"{k} {ms[k][0]:.1f} + {ms[k][1]:.1f}" for k in trials)
    cores_text = ", ".join(f"{k} {cores[k][0]:.2f} / {cores[k][1]:.2f}" for k in trials)
    relay_text = ""
    if relayed:
        relay_text = "; the latency proxy's CPU ms per create (a process of the bench's): " + (
            ", ".join(f"{k} {statistics.median(relayed[k]):.1f}" for k in trials))
    detail = (f"CPU ms per create, this process + storage server: {cpu_text}; cores busy, "
              f"this process / storage server: {cores_text}{relay_text}; largest retag lag "
              f"at a trial's end {max(lags, default=0.0):.2f} s")
    targets: dict[str, float | None] = {"inline": None, "deferred": None}
    if size >= 64 * MIB:
        targets = {"inline": 0.95 if backend.kind == "azure" else None, "deferred": 0.95}
    elif backend.kind == "azure" and size == 4 * KIB and concurrency == 16:
        targets["deferred"] = 0.85 if backend.latency_ms >= 20 else (
            0.6 if not backend.latency_ms else None)
    unit = f"{size // KIB} KiB" if size < MIB else f"{size // MIB} MiB"
    return [Result(
        case=f"create {unit} c{concurrency} retag {way}{where}",
        figure_name=f"ledger creates/s ({way})",
        figure=rate[way], baseline_name="naive upload-then-insert creates/s",
        baseline=rate["naive"], unit="/s", better="higher", target=targets[way],
        detail=(f"deferred/inline {rate['deferred'] / rate['inline']:.2f}x; with every "
                f"owed retag drained {drained:.1f}/s, {drained / rate['naive']:.2f}x naive; "
                + detail if way == "deferred" else detail),
        latency_ms=backend.latency_ms) for way in ("inline", "deferred")]


async def run(ctx: Context) -> list[Result]:
    results = []
    for latency_ms in ctx.latencies:
        for kind in kinds(latency_ms):
            planned = [(size, concurrency, files) for size, concurrency, files
                       in plan(ctx.quick, kind, latency_ms, ctx.scale)
                       if not ctx.sizes or size in ctx.sizes]
            if not planned or (ctx.stores and kind not in ctx.stores):
                continue
            async with backend_ledger(ctx, kind, latency_ms) as backend:
                async with backend.ledger.db.engine.begin() as conn:
                    await conn.run_sync(naive_table.metadata.create_all)
                for size, concurrency, files in planned:
                    results += await measure(ctx, backend, size, concurrency, files)
    return results
