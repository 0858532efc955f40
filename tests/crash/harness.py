"""The crash matrix's machinery: prepare a state, SIGKILL a child at one failpoint, describe
what it left, resolve it (sweeper, deletion path, reconciler, with the clock past every
cutoff), check the invariants, and record one row for ``docs/crash-matrix.md``."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from sqlalchemy import select

from blobledger.config import minimum_sweep_after
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow, DocumentRow
from blobledger.workers.invariants import InvariantReport, check
from tests.crash.child import SETTINGS, Job, Target, chunks, main, payload
from tests.support.forkserver import forkserver_context

_CONTEXT = forkserver_context("tests.crash.child")
CHILD_TIMEOUT = 60.0
#: clock offsets: past the upload deadline (a lease ran out) / past every cutoff
LEASE_EXPIRED = minimum_sweep_after(SETTINGS["upload_deadline"]) + 1  # and the takeover margin
PAST_CUTOFFS = SETTINGS["sweep_after"] + SETTINGS["delete_grace"] + 3600
#: the resolution runs later still: past the lease a killed sweeper held on its claim
RESOLVE_AT = 2 * PAST_CUTOFFS


async def run_child(job: Job) -> int | None:
    """Run the job in a forked child; its exit code (-9 when SIGKILLed at the failpoint)."""
    process = _CONTEXT.Process(target=main, args=(job,), daemon=True)
    process.start()
    await asyncio.to_thread(process.join, CHILD_TIMEOUT)
    if process.exitcode is None:
        process.kill()
        await asyncio.to_thread(process.join, 10)
        raise AssertionError(f"child for {job.failpoints} hung for {CHILD_TIMEOUT}s")
    return process.exitcode


async def kill_at(job: Job) -> None:
    code = await run_child(job)
    assert code == -signal.SIGKILL, (
        f"{job.op} under {job.failpoints}: child exited {code}, not killed at the point")


async def describe(ledger: Ledger) -> str:
    """What the database and store hold, in a few words (for the matrix document)."""
    async with ledger.db.session() as session:
        docs = (await session.execute(select(DocumentRow.status, DocumentRow.version))).all()
        rows = (await session.execute(select(BlobRow.state))).scalars().all()
    tags = Counter([(info.tags or {}).get("state", "untagged")
                    async for info in ledger.store.list(ledger.settings.blob_prefix + "/")])
    leftovers = [u async for u in ledger.store.list_uncommitted(ledger.settings.blob_prefix)]
    parts = [
        "documents: " + (", ".join(f"{s} v{v}" for s, v in sorted(docs)) or "none"),
        "rows: " + _counts(Counter(rows)),
        "blobs: " + _counts(tags),
    ]
    if leftovers:
        parts.append(f"uncommitted bytes under {len(leftovers)} name(s)")
    return "; ".join(parts)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counter.items())) or "none"


def summary(report: object) -> list[str]:
    """The non-zero counters of a worker's report (a dataclass), as ``name n`` strings."""
    if not is_dataclass(report):
        return []
    out = []
    for f in fields(report):
        value = getattr(report, f.name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value:
            out.append(f"{f.name.replace('_', ' ')} {value}")
        elif isinstance(value, (list, tuple, dict)) and value:
            out.append(f"{f.name.replace('_', ' ')} {len(value)}")
    return out


@dataclass
class Resolution:
    steps: list[str] = field(default_factory=list)
    report: InvariantReport | None = None


Resolver = Callable[[Ledger], Awaitable[list[str]]]


async def resolve(target: Target, resolver: Resolver) -> Resolution:
    """With the clock past every cutoff: run the resolver, then check settled invariants."""
    ledger = target.ledger(clock_offset=RESOLVE_AT)
    async with ledger:
        steps = await resolver(ledger)
        report = await check(ledger, settled=True)
    return Resolution(steps, report)


async def read_all(ledger: Ledger, doc_id: str) -> bytes:
    return b"".join([chunk async for chunk in ledger.read(doc_id)])


async def create_ready(target: Target, name: str, seed: int) -> Any:
    async with target.ledger() as ledger:
        return await ledger.create(name, chunks(payload(seed)))


async def settle(ledger: Ledger) -> list[str]:
    """Sweeper passes (pending intents, then the deletion path) until one finds nothing to
    do, then the reconciler with ``fix=True``; what each did, in a few words."""
    from blobledger.workers.reconciler import reconcile
    from blobledger.workers.sweeper import Sweeper

    steps: list[str] = []
    start = ledger.clock_offset
    for n in range(4):
        # each pass a grace period later: rows a pass hands to the deletion path are due
        ledger.clock_offset = start + n * (ledger.settings.delete_grace + 1)
        did = summary(await Sweeper(ledger).run_once())
        did = [d for d in did if not d.startswith(("claimed", "batches"))]
        if not did:
            break
        steps.append("sweeper: " + ", ".join(did))
    found = await reconcile(ledger, fix=True, older_than=ledger.settings.upload_deadline)
    if found.total or found.fixed:
        steps.append("reconciler: " + ", ".join(
            f"{n} {getattr(found, n)}" for n in ("orphan", "missing", "missing_ready",
                                                  "mismatch", "uncommitted", "fixed")
            if getattr(found, n)))
    assert not (found.missing_ready or found.missing or found.mismatch
                or found.fixed < found.orphan), found.findings
    return steps

