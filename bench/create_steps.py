"""``python -m bench.create_steps``: where the wall time of one 4 KiB create goes on Azurite
with added store latency (default 20 ms, 2 concurrent), the ledger (deferred retag) beside
the naive handler (upload, then one insert), interleaved in one run.

Trials, each ``--creates`` creates at ``--concurrency``, alternating ``--repeats`` times:

- ``naive``: the naive handler (upload, then one insert in a transaction);
- ``worker``: the ledger, deferred retag, its retag worker running beside (as in ``serve``
  and in ``bench.retag``'s figure);
- ``off``: the same ledger with no worker during the trial; the retags it left owed are
  done after the trial, untimed (the writer's path alone);
- ``w<cap>/<linger>[/<lanes>]``: the worker running beside with its tag requests in flight
  capped at ``cap`` and its linger after a C4 of ``linger`` seconds (and group commit's
  lanes at ``lanes``), one trial per ``--worker`` given (how a worker that sends fewer
  requests at once, or later, weighs on the writers);
- ``off/<lanes>``: ``off`` with group commit's lanes at ``lanes``, one per ``--off``.

Beside each trial's throughput (creates answered per second), the same with the time until
every retag it left owed was done counted in (the worker's stop, then the retagger run until
none is owed): what the machine sustains with the retags' work included.

Per create, wall milliseconds of each step (medians and 90th percentiles over the run):
for the ledger ``before put`` (the checks, the bucket's admission, C1), ``put`` (the store
call: the SDK's request through the proxy), ``after put`` (C4 and the answer); for the
naive handler ``put`` and ``insert``. Beside them: the HTTP exchange of each put as aiohttp
sees it (so the SDK's own time on each side of it shows), how many retag requests were in
flight when each writer's put was sent, the event loop's lateness (a 1 ms ticker's
overshoot, which is CPU this process spent elsewhere), CPU per create of this process and
of Azurite. A measurement tool for the bench's notes; not a case of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from sqlalchemy import insert

from bench.common import Context, backend_ledger, cpu_seconds
from bench.create import gather_limited, naive_table
from blobledger.protocol.group import Group
from blobledger.workers import retagger as retagger_module
from blobledger.workers.retagger import Retagger, retag_forever

KIB = 1024
#: the trial a create belongs to, and its own step record
CURRENT: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "create_steps", default=None)


@dataclass
class Trace:
    """What one trial recorded."""

    steps: list[dict[str, float]] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    retags_in_flight: int = 0
    retag_at_put: list[int] = field(default_factory=list)
    retag_requests: int = 0
    cpu_mine: float = 0.0
    cpu_server: float = 0.0
    wall: float = 0.0
    acked: float = 0.0  # when the trial's last create was answered
    drained: float = 0.0  # seconds until every retag it owed was done too
    queued: int = 0  # C1/C4 runs that found one of their kind in flight
    queued_alone: int = 0  # ... and were then sent alone all the same
    queue_wait: list[float] = field(default_factory=list)


TRACE = Trace()


def _hook_group() -> None:
    """Group commit's runs (C1, C4): which found one of their kind in flight, and how long
    each such run waited before its own statement (or batch) went."""
    original = Group.run

    async def timed(self: Group[Any, Any], params: Any, alone: Any) -> Any:
        if self._in_flight < self.lanes and not self._queue:
            return await original(self, params, alone)
        queued = time.perf_counter()
        sent: list[float] = []

        async def stamped() -> Any:
            sent.append(time.perf_counter())
            return await alone()

        try:
            return await original(self, params, stamped)
        finally:
            TRACE.queued += 1
            # alone after waiting: until its own statement went; in a batch: the whole run
            TRACE.queue_wait.append((sent[0] if sent else time.perf_counter()) - queued)
            TRACE.queued_alone += bool(sent)

    Group.run = timed  # type: ignore[method-assign]


def _hook_aiohttp() -> None:
    """Every HTTP exchange: a writer's put timed, a retag (``comp=tags``) counted in flight."""
    original = aiohttp.ClientSession._request

    async def timed(self: aiohttp.ClientSession, method: str, url: Any, *args: Any,
                    **kwargs: Any) -> Any:
        text = str(url)
        tags = "comp=tags" in text
        record = CURRENT.get()
        started = time.perf_counter()
        if tags:
            TRACE.retags_in_flight += 1
            TRACE.retag_requests += 1
        elif record is not None and method == "PUT":
            TRACE.retag_at_put.append(TRACE.retags_in_flight)
        try:
            return await original(self, method, url, *args, **kwargs)
        finally:
            if tags:
                TRACE.retags_in_flight -= 1
            elif record is not None and method == "PUT":
                record["http"] = time.perf_counter() - started

    aiohttp.ClientSession._request = timed  # type: ignore[method-assign,assignment]


async def _ticker(stop: asyncio.Event) -> None:
    """The loop's lateness: how much later than asked a 1 ms sleep wakes."""
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(0.001)
        TRACE.lateness.append(time.perf_counter() - asked - 0.001)


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main_async(args: argparse.Namespace) -> int:
    from tests.support.latency import start_process
    from tests.support.services import create_database, drop_database, start_azurite

    _hook_aiohttp()
    _hook_group()
    azurite = start_azurite()
    ctx = Context(azurite=azurite, postgres_url=await create_database(), repeats=args.repeats,
                  latencies=(0.0, args.latency))
    if args.latency:
        ctx.proxies["azure", args.latency] = start_process(azurite.port, args.latency)
    try:
        async with backend_ledger(ctx, "azure", args.latency) as backend:
            return await _measure(args, ctx, backend)
    finally:
        for proxy in ctx.proxies.values():
            proxy.stop()
        azurite.stop()
        await drop_database(ctx.postgres_url)


async def _measure(args: argparse.Namespace, ctx: Context, backend: Any) -> int:
    ledger, db, raw_put = backend.ledger, backend.ledger.db, backend.raw_put
    async with db.engine.begin() as conn:
        await conn.run_sync(naive_table.metadata.create_all)
    ledger.settings = ledger.settings.with_(retag="deferred")
    ledger.store.capabilities = replace(ledger.store.capabilities,
                                        state_conditioned_transition=True)
    payload = os.urandom(args.size)
    store = ledger.store
    put = store.put

    async def timed_put(*a: Any, **kw: Any) -> Any:
        record = CURRENT.get()
        if record is not None:
            record["put_start"] = time.perf_counter()
        try:
            return await put(*a, **kw)
        finally:
            if record is not None:
                record["put_end"] = time.perf_counter()

    store.put = timed_put

    async def ledger_creates() -> None:
        tag = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            record = {"start": time.perf_counter()}
            CURRENT.set(record)
            await ledger.create(f"s-{tag}-{i}.bin", payload,
                                content_type="application/octet-stream")
            record["end"] = time.perf_counter()
            TRACE.steps.append(record)

        await gather_limited(args.creates, args.concurrency, one)
        TRACE.acked = time.perf_counter()

    async def drain() -> None:
        while (await Retagger(ledger).run_once()).retagged:
            pass

    groups = (ledger.transitions._c1s, ledger.transitions._c4s)

    def lanes(count: int | None, trial: Callable[[], Awaitable[None]]
              ) -> Callable[[], Awaitable[None]]:
        """``trial`` with group commit's lanes at ``count`` (None: as they are)."""
        if count is None:
            return trial

        async def run() -> None:
            saved = [group.lanes for group in groups]
            for group in groups:
                group.lanes = count
            try:
                await trial()
            finally:
                for group, value in zip(groups, saved, strict=True):
                    group.lanes = value
        return run

    def with_worker(cap: int | None, linger: float | None = None
                    ) -> Callable[[], Awaitable[None]]:
        async def trial() -> None:
            stop = asyncio.Event()
            saved = retagger_module.CONCURRENCY
            if cap is not None:
                retagger_module.CONCURRENCY = cap
            worker = asyncio.create_task(retag_forever(
                ledger, interval=1.0, stop=stop,
                linger=retagger_module.RETAG_LINGER if linger is None else linger))
            try:
                await ledger_creates()
            finally:
                stop.set()
                ledger.retag_owed.set()
                await worker
                retagger_module.CONCURRENCY = saved
        return trial

    async def off() -> None:
        await ledger_creates()

    async def naive() -> None:
        tag = uuid.uuid4().hex[:8]

        async def one(i: int) -> None:
            record = {"start": time.perf_counter()}
            CURRENT.set(record)
            blob_name = f"naive/{uuid.uuid4().hex}.bin"
            record["put_start"] = time.perf_counter()
            await raw_put(blob_name, payload)
            record["put_end"] = time.perf_counter()
            async with db.session() as session:
                await session.execute(insert(naive_table).values(
                    name=f"sn-{tag}-{i}.bin", blob_name=blob_name))
            record["end"] = time.perf_counter()
            TRACE.steps.append(record)

        await gather_limited(args.creates, args.concurrency, one)
        TRACE.acked = time.perf_counter()

    trials: dict[str, Callable[[], Awaitable[None]]] = {
        "naive": naive, "worker": with_worker(None), "off": off}
    for spec in args.worker:
        cap, linger, *lane = spec.split("/")
        trials["w" + spec] = lanes(int(lane[0]) if lane else None,
                                   with_worker(int(cap), float(linger)))
    for count in args.off:
        trials[f"off/{count}"] = lanes(count, off)
    server = ctx.azurite.process.pid
    traces: dict[str, list[Trace]] = {name: [] for name in trials}
    for trial in trials.values():  # warm-up
        await trial()
        await drain()
    global TRACE
    for _ in range(args.repeats):
        for name, trial in trials.items():
            TRACE = Trace()
            stop = asyncio.Event()
            ticker = asyncio.create_task(_ticker(stop))
            mine, theirs = cpu_seconds(os.getpid()), cpu_seconds(server)
            started = time.perf_counter()
            await trial()
            TRACE.wall = TRACE.acked - started  # a worker's stop is not the trial's
            TRACE.cpu_mine = cpu_seconds(os.getpid()) - mine
            TRACE.cpu_server = cpu_seconds(server) - theirs
            stop.set()
            await ticker
            traces[name].append(TRACE)
            done, TRACE = TRACE, Trace()  # the drain's requests are not the trial's
            await drain()  # what ``off`` left owed, and the worker's rest
            done.drained = time.perf_counter() - started
            await asyncio.sleep(0.2)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"size {args.size} B, c{args.concurrency}, {args.latency:g} ms added, "
          f"{args.creates} creates x {args.repeats} repeats, load average at the end "
          f"{' '.join(load)}")
    base = statistics.median(t.wall for t in traces["naive"])
    print(f"{'trial':<12} {'creates/s':>9} {'ratio':>6} {'wall ms':>8} {'before':>7} "
          f"{'put':>6} {'http':>6} {'after':>6} {'p90 wall':>8} {'late p50/p99/max ms':>20} "
          f"{'retags@put':>10} {'CPU ms me+server':>16}")
    for name, runs in traces.items():
        steps = [s for t in runs for s in t.steps]
        wall = statistics.median(t.wall for t in runs)
        total = [(s["end"] - s["start"]) * 1000 for s in steps]
        before = [(s["put_start"] - s["start"]) * 1000 for s in steps]
        put_ms = [(s["put_end"] - s["put_start"]) * 1000 for s in steps]
        http = [s.get("http", 0.0) * 1000 for s in steps]
        after = [(s["end"] - s["put_end"]) * 1000 for s in steps]
        late = [x * 1000 for t in runs for x in t.lateness]
        at_put = [x for t in runs for x in t.retag_at_put]
        n = sum(len(t.steps) for t in runs)
        mine = sum(t.cpu_mine for t in runs) / n * 1000
        theirs = sum(t.cpu_server for t in runs) / n * 1000
        print(f"{name:<12} {args.creates / wall:>9.1f} {base / wall:>5.2f}x "
              f"{statistics.median(total):>8.2f} {statistics.median(before):>7.2f} "
              f"{statistics.median(put_ms):>6.2f} {statistics.median(http):>6.2f} "
              f"{statistics.median(after):>6.2f} {_pct(total, 0.9):>8.2f} "
              f"{_pct(late, 0.5):>6.2f}/{_pct(late, 0.99):>5.2f}/{max(late, default=0):>6.2f} "
              f"{statistics.mean(at_put) if at_put else 0:>10.2f} "
              f"{mine:>7.2f} + {theirs:>6.2f}")
        drained = statistics.median(t.drained for t in runs)
        print(f"   with every owed retag done (the worker's stop and the drain after the "
              f"trial counted in): {args.creates / drained:.1f}/s, "
              f"{statistics.median(t.drained for t in traces['naive']) / drained:.2f}x naive")
        if args.verbose:
            slow = sorted(steps, key=lambda s: s["start"] - s["end"])[:3]
            print("   p99/max wall ms: "
                  f"{_pct(total, 0.99):.1f}/{max(total):.1f}; slowest (before/put/after ms): "
                  + ", ".join(f"{(s['put_start'] - s['start']) * 1000:.0f}/"
                              f"{(s['put_end'] - s['put_start']) * 1000:.0f}/"
                              f"{(s['end'] - s['put_end']) * 1000:.0f}" for s in slow)
                  + f"; mean wall ms {statistics.mean(total):.2f}")
            waits = [w * 1000 for t in runs for w in t.queue_wait]
            queued = sum(t.queued for t in runs)
            print(f"   C1/C4 runs queued behind one in flight: {queued} of {2 * n}, "
                  f"{sum(t.queued_alone for t in runs)} of them then sent alone; their wait "
                  f"ms median {_pct(waits, 0.5):.2f}, mean "
                  f"{statistics.mean(waits) if waits else 0:.2f}")
            print("   per-run creates/s: "
                  + ", ".join(f"{args.creates / t.wall:.1f}" for t in runs)
                  + f"; retag requests during: {sum(t.retag_requests for t in runs)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.create_steps")
    parser.add_argument("--latency", type=float, default=20.0, help="added ms (default 20)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--creates", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=4 * KIB)
    parser.add_argument("--worker", action="append", default=[],
                        metavar="CAP/LINGER[/LANES]",
                        help="also a trial with the worker's tag requests in flight capped "
                        "at CAP, its linger LINGER seconds (and group commit's lanes at "
                        "LANES; repeatable)")
    parser.add_argument("--off", action="append", default=[], type=int, metavar="LANES",
                        help="also a trial without the worker, group commit's lanes at "
                        "LANES (repeatable)")
    parser.add_argument("--verbose", action="store_true")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())

