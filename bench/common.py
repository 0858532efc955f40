"""What every benchmark case shares: the real peers, a result line, the table.

A case is a module in ``bench/`` (not starting with ``_`` and not this one) defining::

    TITLE = "what it measures"
    async def run(ctx: Context) -> list[Result]: ...

Each :class:`Result` names the baseline, the figure, the ratio and the target, and says
plainly whether the target was met. Timing is median-of-N of interleaved repeats.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.support.services import Azurite, MotoS3

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores.azure import AzureStore


@dataclass
class Context:
    azurite: Azurite
    postgres_url: str
    moto: MotoS3 | None = None
    quick: bool = False
    repeats: int = 3
    notes: list[str] = field(default_factory=list)


@asynccontextmanager
async def azure_ledger(ctx: Context) -> AsyncIterator[tuple[Ledger, AzureStore]]:
    """A connected ledger on the case's PostgreSQL database and a fresh Azurite container,
    which is deleted afterwards."""
    store = AzureStore(f"bench{uuid.uuid4().hex[:12]}",
                       connection_string=ctx.azurite.connection_string)
    ledger = Ledger(Database(ctx.postgres_url), store,
                    Settings(database_url=ctx.postgres_url, store_url=store.url))
    await ledger.connect()
    try:
        yield ledger, store
    finally:
        await store._client().delete_container()
        await ledger.close()


#: the storage backends a case runs on, side by side (S3 on moto's server)
BACKENDS = ("azure", "s3")


@dataclass
class Backend:
    """A connected ledger on one storage backend, and a raw put on the same client for the
    baselines (a naive handler, a bare upload)."""

    kind: str
    ledger: Ledger
    raw_put: Callable[[str, bytes], Awaitable[object]]

    @property
    def label(self) -> str:
        return {"azure": "Azurite", "s3": "S3 (moto)"}[self.kind]


@asynccontextmanager
async def backend_ledger(ctx: Context, kind: str) -> AsyncIterator[Backend]:
    """A ledger on the case's PostgreSQL database and a fresh container (Azurite) or bucket
    (moto's S3 server)."""
    if kind == "azure":
        async with azure_ledger(ctx) as (ledger, store):
            client = store._client()
            yield Backend(kind, ledger, lambda name, data: client.upload_blob(
                name, data, max_concurrency=4))
        return
    assert ctx.moto is not None, "the S3 cases need moto's server"
    s3 = ctx.moto.store()
    ledger = Ledger(Database(ctx.postgres_url), s3,
                    Settings(database_url=ctx.postgres_url, store_url=s3.url))
    await ledger.connect()
    try:
        raw = await s3._client()
        yield Backend(kind, ledger, lambda name, data: raw.put_object(
            Bucket=s3.bucket, Key=name, Body=data))
    finally:
        await ledger.close()


@dataclass
class Result:
    case: str
    figure_name: str
    figure: float
    baseline_name: str
    baseline: float
    unit: str
    #: "higher" if a larger ratio figure/baseline is better (throughput), "lower" otherwise
    better: str
    #: None: reported for context, with no target of its own
    target: float | None
    detail: str = ""

    @property
    def ratio(self) -> float:
        return self.figure / self.baseline if self.baseline else float("inf")

    @property
    def met(self) -> bool:
        if self.target is None:
            return True
        return self.ratio >= self.target if self.better == "higher" else self.ratio <= self.target

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ratio=round(self.ratio, 3), met=self.met)
        return data


async def median_seconds(func: Callable[[], Awaitable[object]], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        await func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def interleaved(
    funcs: dict[str, Callable[[], Awaitable[object]]], repeats: int
) -> dict[str, float]:
    """Median wall seconds per function, running them interleaved (a, b, a, b, ...)."""
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, func in funcs.items():
            start = time.perf_counter()
            await func()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def table(results: list[Result]) -> str:
    header = f"{'case':<34} {'figure':>14} {'baseline':>14} {'ratio':>7} {'target':>8}  verdict"
    lines = [header, "-" * len(header)]
    for r in results:
        if r.target is None:
            target, verdict = "-", "no target"
        else:
            target = (">=" if r.better == "higher" else "<=") + f"{r.target:g}x"
            verdict = "met" if r.met else "MISSED"
        lines.append(
            f"{r.case:<34} {r.figure:>10.2f} {r.unit:<3} {r.baseline:>10.2f} {r.unit:<3} "
            f"{r.ratio:>6.2f}x {target:>8}  {verdict}"
        )
        lines.append(f"    figure: {r.figure_name}; baseline: {r.baseline_name}"
                     + (f"; {r.detail}" if r.detail else ""))
    return "\n".join(lines)
