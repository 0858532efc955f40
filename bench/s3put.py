"""The ledger's 64 MiB create on S3 (moto) by the store's single-put limit: the default
(8 MiB: the body goes as a multipart upload) and a limit above the body (one create-only
PutObject, ``BLOBLEDGER_S3_SINGLE_PUT_LIMIT``), beside the naive handler (one PutObject, one
insert), at 1 and 16 concurrent, deferred retag (the retag worker beside the creates, as in
``bench.retag``), interleaved in the same run, loopback only.

The detail gives each one's CPU per create, this process's and moto's. The memory a put
holds with each limit is ``python -m bench.s3memory``'s (a fresh process per figure: here
the trials reuse the memory earlier ones freed). No targets: the 64 MiB target is
``bench.retag``'s.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy import insert

from bench.common import Backend, Context, Result, backend_ledger, cpu_seconds, empty_bucket
from bench.create import gather_limited, naive_table
from blobledger.stores.s3.store import SINGLE_PUT_LIMIT
from blobledger.workers.retagger import Retagger, retag_forever

TITLE = "64 MiB creates on S3 (moto): the default single-put limit vs one above the body"
MIB = 1024 * 1024


async def measure(ctx: Context, backend: Backend, payload: bytes, limits: dict[str, int],
                  concurrency: int, n: int) -> list[Result]:
    assert ctx.moto is not None, "this case needs moto's server"
    ledger, store = backend.ledger, backend.ledger.store

    def ledger_trial(limit: int) -> Callable[[], Awaitable[None]]:
        async def trial() -> None:
            store.single_put_limit = limit  # type: ignore[attr-defined]
            stop = asyncio.Event()
            worker = asyncio.create_task(retag_forever(ledger, interval=1.0, stop=stop))
            tag = uuid.uuid4().hex[:8]
            try:
                await gather_limited(n, concurrency, lambda i: ledger.create(
                    f"p-{tag}-{i}.bin", payload, content_type="application/octet-stream"))
            finally:
                stop.set()
                ledger.retag_owed.set()
                await worker
        return trial

    async def naive() -> None:
        tag = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            blob_name = f"naive/{uuid.uuid4().hex}.bin"
            await backend.raw_put(blob_name, payload)
            async with ledger.db.session() as session:
                await session.execute(insert(naive_table).values(
                    name=f"pn-{tag}-{i}.bin", blob_name=blob_name))

        await gather_limited(n, concurrency, one)

    trials = {name: ledger_trial(limit) for name, limit in limits.items()}
    trials["naive"] = naive
    took: dict[str, list[float]] = {name: [] for name in trials}
    cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in trials}
    server = ctx.moto.process.pid
    for repeat in range(ctx.repeats + 1):  # the first round warms up, untimed
        for name, trial in trials.items():
            mine, theirs = cpu_seconds(os.getpid()), cpu_seconds(server)
            started = time.perf_counter()
            await trial()
            wall = time.perf_counter() - started
            if repeat:
                took[name].append(wall)
                cpu[name].append(((cpu_seconds(os.getpid()) - mine) / n * 1000,
                                  (cpu_seconds(server) - theirs) / n * 1000))
            while (await Retagger(ledger).run_once()).retagged:  # untimed
                pass
            await empty_bucket(backend)
    rate = {name: n / statistics.median(v) for name, v in took.items()}
    detail = "; ".join(
        f"{name}: CPU ms per create, this process + moto "
        f"{statistics.median(c for c, _ in cpu[name]):.0f} + "
        f"{statistics.median(s for _, s in cpu[name]):.0f}" for name in trials)
    unit = f"{len(payload) // MIB} MiB"
    return [Result(
        case=f"create {unit} c{concurrency} S3 (moto) {name} put",
        figure_name=(f"ledger creates/s, single-put limit {limits[name] / MIB:g} MiB "
                     "(deferred retag)"),
        figure=rate[name], baseline_name="naive upload-then-insert creates/s",
        baseline=rate["naive"], unit="/s", better="higher", target=None,
        detail=detail) for name in limits]


async def run(ctx: Context) -> list[Result]:
    size = (1 if ctx.quick else 64) * MIB
    payload = os.urandom(size)
    limits = {"multipart": min(SINGLE_PUT_LIMIT, size // 2), "single": size}
    out: list[Result] = []
    async with backend_ledger(ctx, "s3") as backend:
        async with backend.ledger.db.engine.begin() as conn:
            await conn.run_sync(naive_table.metadata.create_all)
        backend.ledger.settings = backend.ledger.settings.with_(retag="deferred")
        for concurrency, n in ((1, 1 if ctx.quick else 2), (16, 16)):
            out += await measure(ctx, backend, payload, limits, concurrency, n)
    return out
