"""Held documents and their processing: writers whose creations are held
(``Ledger.create(..., hold=True)``), processing workers (:class:`ProcessingWorker`, the real
one) running two processors of the harness (``content-type`` and ``scan``: in-process,
seeded, each run a preemption point, a run failing now and then), and the check that a
held creation is never visible before every processor accepted it.

The processors' verdicts are decided by the bytes (as a real processor's are, so a run
repeated by another worker after a lapsed lease gives the same verdict): ``scan`` rejects
bytes holding ``EICAR``, ``content-type`` bytes declared ``image/png`` (text is not PNG).
So the model knows, from the bytes alone, which held creations must never be ready
(:func:`check_held`, on the outbox check's snapshot after every preemption point of a run
with held writers) and which must be ready once the processing has settled
(:func:`settle_held`).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from blobledger.errors import NotFound
from blobledger.protocol.documents import Document
from blobledger.protocol.models import DocumentStatus
from blobledger.workers.processing import ProcessingWorker
from blobledger.workers.processors.base import ACCEPT, ProcessorFailed, Reader, Verdict, reject

if TYPE_CHECKING:
    from tests.sim.sim import _Run

#: the settings a run with held writers adds (``scan`` needs a scanner configured; the
#: harness's own runs in its place)
HELD_SETTINGS: dict[str, Any] = {"processors": ("content-type", "scan"),
                                 "scan_url": "http://scanner.sim/", "processing_lease": 120.0,
                                 "processing_attempts": 50}
MARKER = b"EICAR"
#: a processor's run fails (the scanner errored) this often: tried again after a backoff
FAILS = 0.15


class SimProcessor:
    """A processor of the harness: reads the document's bytes, then decides by them."""

    def __init__(self, sim: _Run, name: str) -> None:
        self.sim, self.name = sim, name

    async def run(self, doc: Document, read: Reader) -> Verdict:
        data = b"".join([chunk async for chunk in read(0, None)])
        await self.sim.point(f"processor.{self.name}")
        if self.sim.rng.random() < FAILS:
            raise ProcessorFailed(f"simulated: the {self.name} processor errored")
        return verdict(self.name, data, doc.content_type)


def verdict(name: str, data: bytes, content_type: str) -> Verdict:
    if name == "scan":
        return reject("a signature was found") if MARKER in data else ACCEPT
    return reject("the bytes are not PNG") if content_type == "image/png" else ACCEPT


def rejected(data: bytes, content_type: str) -> bool:
    """Whether a processor rejects these bytes (the model's view of the verdicts)."""
    return any(not verdict(name, data, content_type).accepted
               for name in HELD_SETTINGS["processors"])


async def held_writer(run: _Run, n: int) -> None:
    """Held creations on names of their own, under an idempotency key, one in three with
    bytes a processor rejects; each answered ``held`` (never ``ready``)."""
    from tests.sim.sim import Violation, _short

    ledger = run.ledger()
    for i in range(run.config.ops):
        name = run.rng.choice(run.names) + f"-h{n}.{i}"
        kind = run.rng.choice(("clean", "clean", "scan", "type"))
        data = f"h{n} op{i} {run.rng.getrandbits(32)}".encode() + (
            b" " + MARKER if kind == "scan" else b"")
        content_type = "image/png" if kind == "type" else "text/plain"
        sha = hashlib.sha256(data).hexdigest()
        if rejected(data, content_type):
            run.rejecting.add(sha)
        run.note(f"h{n} held create {name} ({kind}) sha={sha[:8]}")
        outcome, value = await run.op(f"h{n}.create", lambda: ledger.create(
            name, data, content_type=content_type, idempotency_key=f"h{n}-{i}",  # noqa: B023
            hold=True))
        run.note(f"h{n} held create {name}: {outcome} {_short(value)} "
                 f"{getattr(value, 'status', '')}")
        if outcome != "ok":
            continue
        run.result.acknowledged += 1
        if value.status != DocumentStatus.HELD.value:
            raise Violation(f"a held create of {name} answered {value.status}")
        run.held[value.id] = (sha, sha in run.rejecting)


async def processing_worker(run: _Run, n: int, rounds: int) -> None:
    """A processing worker: ``ProcessingWorker.run_once`` now and then."""
    from tests.sim.sim import _short

    worker = ProcessingWorker(run.ledger(), processors=processors(run))
    for _ in range(rounds):
        await asyncio.sleep(run.rng.choice((1.0, 10.0, 70.0)))
        run.note(f"processing{n} runs")
        outcome, value = await run.op(f"processing{n}", worker.run_once)
        run.note(f"processing{n}: {outcome} {_short(value)}")


def processors(run: _Run) -> dict[str, Any]:
    return {name: SimProcessor(run, name) for name in HELD_SETTINGS["processors"]}


def check_held(run: _Run, documents: list[Any]) -> None:
    """On one snapshot of the documents: none whose bytes a processor rejects is ready (a
    held creation is visible only once every processor accepted it)."""
    from tests.sim.sim import Violation

    for row in documents:
        if row.status == DocumentStatus.READY.value and row.sha256 in run.rejecting:
            raise Violation(f"document {row.id} is ready (v{row.version}), though a "
                            "processor rejects its bytes (a held creation released before "
                            "every processor accepted it)")


async def settle_held(run: _Run, ledger: Any) -> None:
    """The processing settled (the workers run until nothing is held, past every backoff
    and lease): each held creation acknowledged is ready with its bytes if every processor
    accepts them, gone otherwise."""
    from tests.sim.sim import Violation

    worker = ProcessingWorker(ledger, processors=processors(run))
    for _ in range(200):
        report = await worker.run_once()
        if not report.held:
            break
        run.loop.advance(HELD_SETTINGS["processing_lease"] + 300.0)
    else:
        raise Violation("held documents never settled")
    for doc_id, (sha, rejects) in run.held.items():
        try:
            found = await ledger.get(doc_id)
        except NotFound:
            if rejects:
                continue
            raise Violation(f"held document {doc_id}, which every processor accepts, is "
                            "gone after the processing settled") from None
        if rejects:
            raise Violation(f"held document {doc_id} is ready, though a processor rejects "
                            "its bytes")
        if found.sha256 != sha:
            raise Violation(f"held document {doc_id} released with {found.sha256}, sent {sha}")
