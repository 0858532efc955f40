"""What every benchmark case shares: the real peers, a result line, the table.

A case is a module in ``bench/`` (not starting with ``_`` and not this one) defining::

    TITLE = "what it measures"
    async def run(ctx: Context) -> list[Result]: ...

Each :class:`Result` names the baseline, the figure, the ratio and the target, and says
plainly whether the target was met. Timing is median-of-N of interleaved repeats.

**Latency.** ``ctx.latencies`` lists the added round-trip times (milliseconds) every storage
case runs at: 0 is loopback, straight to the service; any other is a delaying proxy in
front of Azurite and of moto's S3 server (``tests/support/latency.py``: each response is held
that long, so every request/response exchange costs one more round trip). The figure and
its baseline always go through the same proxy, in the same run, interleaved.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.support.latency import ProxyProcess
from tests.support.services import Azurite, MotoS3, connection_string

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores import Store
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore


@dataclass
class Context:
    azurite: Azurite
    postgres_url: str
    moto: MotoS3 | None = None
    quick: bool = False
    repeats: int = 3
    notes: list[str] = field(default_factory=list)
    #: added round-trip times in milliseconds, 0 (loopback) first
    latencies: tuple[float, ...] = (0.0,)
    #: (service, milliseconds) -> the delaying proxy in front of it
    proxies: dict[tuple[str, float], ProxyProcess] = field(default_factory=dict)
    #: only these sizes (bytes) and stores ("azure", "s3", "local"), where a case honours
    #: it (``retag``); empty: all of them
    sizes: tuple[int, ...] = ()
    stores: tuple[str, ...] = ()
    #: the 4 KiB trials' creates multiplied by this, where a case honours it (``retag``)
    scale: int = 1

    def azure_connection_string(self, latency_ms: float = 0.0) -> str:
        """Azurite's connection string, through the proxy for ``latency_ms`` (if not 0)."""
        if not latency_ms:
            return self.azurite.connection_string
        return connection_string(self.proxies["azure", latency_ms].port)

    def s3_endpoint(self, latency_ms: float = 0.0) -> str:
        assert self.moto is not None, "the S3 cases need moto's server"
        if not latency_ms:
            return self.moto.endpoint_url
        return f"http://127.0.0.1:{self.proxies['s3', latency_ms].port}"


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, all its threads (0 if it is gone)."""
    if pid == os.getpid():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def rtt(latency_ms: float) -> str:
    """How a case's name shows its added round trip ("" on loopback)."""
    return f" @{latency_ms:g}ms" if latency_ms else ""


@asynccontextmanager
async def azure_ledger(
    ctx: Context, latency_ms: float = 0.0
) -> AsyncIterator[tuple[Ledger, AzureStore]]:
    """A connected ledger on the case's PostgreSQL database and a fresh Azurite container
    (reached with ``latency_ms`` added per round trip), which is deleted afterwards."""
    store = AzureStore(f"bench{uuid.uuid4().hex[:12]}",
                       connection_string=ctx.azure_connection_string(latency_ms))
    ledger = Ledger(Database(ctx.postgres_url), store,
                    Settings(database_url=ctx.postgres_url, store_url=store.url))
    await ledger.connect()
    try:
        yield ledger, store
    finally:
        await store._client().delete_container()
        await ledger.close()


#: the storage backends a case runs on, side by side (S3 on moto's server); ``"local"``
#: (a folder on this machine's disk, loopback only) is there for the cases that ask for it
BACKENDS = ("azure", "s3")


@dataclass
class Backend:
    """A connected ledger on one storage backend, and a raw put on the same client for the
    baselines (a naive handler, a bare upload); ``direct`` is the same container or bucket
    without the added latency (for seeding, which is not timed)."""

    kind: str
    ledger: Ledger
    raw_put: Callable[[str, bytes], Awaitable[object]]
    direct: Store
    latency_ms: float = 0.0

    @property
    def label(self) -> str:
        return {"azure": "Azurite", "s3": "S3 (moto)", "local": "disk"}[self.kind]


async def _one_chunk(data: bytes) -> AsyncIterator[bytes]:
    yield data


@asynccontextmanager
async def backend_ledger(
    ctx: Context, kind: str, latency_ms: float = 0.0
) -> AsyncIterator[Backend]:
    """A ledger on the case's PostgreSQL database and a fresh container (Azurite) or bucket
    (moto's S3 server), reached with ``latency_ms`` added to every round trip."""
    if kind == "local":  # no server to put a proxy in front of: loopback only
        assert not latency_ms, "the local-disk store has no round trip to add to"
        with tempfile.TemporaryDirectory(prefix="bench-disk-") as root:
            disk = LocalStore(root)
            ledger = Ledger(Database(ctx.postgres_url), disk,
                            Settings(database_url=ctx.postgres_url, store_url=disk.url))
            await ledger.connect()
            try:  # the baselines' put: the same safe write (temp file, fsync, link), no tags
                yield Backend(kind, ledger, lambda name, data: disk.put(
                    name, _one_chunk(data), tags={}), disk, latency_ms)
            finally:
                await ledger.close()
        return
    if kind == "azure":
        async with azure_ledger(ctx, latency_ms) as (ledger, store):
            client = store._client()
            direct = AzureStore(store.container_name,
                                connection_string=ctx.azure_connection_string())
            try:
                yield Backend(kind, ledger, lambda name, data: client.upload_blob(
                    name, data, max_concurrency=4), direct, latency_ms)
            finally:
                await direct.close()
        return
    assert ctx.moto is not None, "the S3 cases need moto's server"
    s3 = ctx.moto.store(endpoint_url=ctx.s3_endpoint(latency_ms))
    direct_s3 = type(s3)(s3.bucket, endpoint_url=ctx.s3_endpoint(), region="us-east-1",
                         path_style=True, access_key=ctx.moto.access_key,
                         secret_key=ctx.moto.secret_key, capabilities=s3.capabilities)
    ledger = Ledger(Database(ctx.postgres_url), s3,
                    Settings(database_url=ctx.postgres_url, store_url=s3.url))
    await ledger.connect()
    try:
        raw = await s3._client()
        yield Backend(kind, ledger, lambda name, data: raw.put_object(
            Bucket=s3.bucket, Key=name, Body=data), direct_s3, latency_ms)
    finally:
        await direct_s3.close()
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
    #: the added round-trip time it ran at (0: loopback)
    latency_ms: float = 0.0

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
    header = f"{'case':<40} {'figure':>14} {'baseline':>14} {'ratio':>7} {'target':>8}  verdict"
    lines = [header, "-" * len(header)]
    for r in results:
        if r.target is None:
            target, verdict = "-", "no target"
        else:
            target = (">=" if r.better == "higher" else "<=") + f"{r.target:g}x"
            verdict = "met" if r.met else "MISSED"
        lines.append(
            f"{r.case + rtt(r.latency_ms):<40} {r.figure:>10.2f} {r.unit:<3} "
            f"{r.baseline:>10.2f} {r.unit:<3} {r.ratio:>6.2f}x {target:>8}  {verdict}"
        )
        lines.append(f"    figure: {r.figure_name}; baseline: {r.baseline_name}"
                     + (f"; {r.detail}" if r.detail else ""))
    return "\n".join(lines)


def latency_table(results: list[Result]) -> str:
    """The ratio of every case at every added round trip, one row per case (``*``: target
    missed at that latency)."""
    latencies = sorted({r.latency_ms for r in results})
    rows: dict[str, dict[float, Result]] = {}
    for r in results:
        rows.setdefault(r.case, {})[r.latency_ms] = r
    if len(latencies) < 2:
        return ""
    header = f"{'ratio by added RTT':<40}" + "".join(f"{f'{ms:g} ms':>16}" for ms in latencies)
    lines = [header, "-" * len(header)]
    for case, by_latency in rows.items():
        if len(by_latency) < 2:
            continue
        cells = []
        for ms in latencies:
            if ms not in by_latency:
                cells.append(f"{'':>16}")
                continue
            r = by_latency[ms]
            target = "" if r.target is None else (
                (">=" if r.better == "higher" else "<=") + f"{r.target:g}")
            mark = "" if r.met else "*"
            cells.append(f"{f'{r.ratio:.2f}x{mark}' + (f' ({target})' if target else ''):>16}")
        lines.append(f"{case:<40}" + "".join(cells))
    return "\n".join(lines)


async def empty_bucket(backend: Backend) -> None:
    """moto holds every byte in its memory: the trials' objects go, untimed (a bench's
    trials of 64 MiB would fill its memory otherwise)."""
    client = await backend.direct._client()  # type: ignore[attr-defined]
    bucket = backend.direct.bucket  # type: ignore[attr-defined]
    listed = await client.list_objects_v2(Bucket=bucket)
    while keys := [{"Key": o["Key"]} for o in listed.get("Contents", [])]:
        await client.delete_objects(Bucket=bucket, Delete={"Objects": keys})
        listed = await client.list_objects_v2(Bucket=bucket)


BENCH_ROOT = Path(__file__).resolve().parents[1]


@asynccontextmanager
async def ab_trees(against: str, prefix: str) -> AsyncIterator[tuple[dict[str, str],
                                                                       dict[str, Path]]]:
    """For an A/B of this process's CPU: Azurite and a database of their own (in the
    children's environment, ``AB_AZURE`` and ``AB_DATABASE_URL``), and the ``src`` of
    commit ``against`` (a detached worktree, removed afterwards) beside the working tree's,
    by name."""
    from tests.support.services import create_database, drop_database, start_azurite

    azurite = start_azurite()
    database = await create_database()
    env = dict(os.environ, AB_DATABASE_URL=database, AB_AZURE=azurite.connection_string)
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), against],  # noqa: ASYNC221
                       cwd=BENCH_ROOT, check=True)
        try:
            yield env, {against: base / "src", "working tree": BENCH_ROOT / "src"}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)],  # noqa: ASYNC221
                           cwd=BENCH_ROOT, check=False)
            azurite.stop()
            await drop_database(database)


def child_json(module: str, src: Path, env: dict[str, str], *args: str) -> Any:
    """``python -m module --child args`` with ``src`` first on its path: the JSON of the last
    line it printed."""
    out = subprocess.run([sys.executable, "-m", module, "--child", *args], cwd=BENCH_ROOT,
                         env=dict(env, PYTHONPATH=f"{src}{os.pathsep}{BENCH_ROOT}"),
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])
