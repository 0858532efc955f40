"""The simulation's actors beyond the document writers and the sweep workers: tus uploads
completed twice at once (a client's retried completion reaching a second process), the
event delivery workers with a receiver that fails now and then, and the checks of what
they leave (:func:`check_events`).

Each takes the run (:class:`tests.sim.sim._Run`): its ledgers, its ``op`` (an operation
that may crash), its seeded ``rng`` and its model of acknowledged documents.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from blobledger.protocol import events
from blobledger.protocol.events import Event
from blobledger.protocol.ledger import Ledger
from blobledger.uploads.resumable import Resumable
from blobledger.workers.delivery import Delivery

if TYPE_CHECKING:
    from tests.sim.sim import _Run

EVENT_TYPES = ("document.ready", "document.replaced", "document.deleted")


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def tus_writer(run: _Run, n: int) -> None:
    """tus uploads on the names of the run, each completed by two processes at once (two
    ledgers): both answers name one document, whose bytes are then the model's."""
    here, there = Resumable(run.ledger()), Resumable(run.ledger())
    for i in range(run.config.ops):
        name = run.rng.choice(run.names) + f"-t{n}.{i}"  # a name of its own (tus holds it)
        data = f"t{n} upload{i} {run.rng.getrandbits(32)}".encode()
        await _upload(run, n, here, there, name, data)


async def _upload(run: _Run, n: int, here: Resumable, there: Resumable, name: str,
                  data: bytes) -> None:
    from tests.sim.sim import Doc, Violation, _short

    sha = hashlib.sha256(data).hexdigest()
    run.note(f"t{n} tus {name} sha={sha[:8]}")

    async def begin() -> str:
        upload = await here.create(len(data), {"filename": name, "content_type": "text/plain"})
        await here.append(upload, 0, _body(data))
        return upload.id

    outcome, upload_id = await run.op(f"t{n}.begin", begin)
    run.note(f"t{n} tus {name}: {outcome} "
             f"{upload_id if outcome == 'ok' else _short(upload_id)}")
    if outcome != "ok":
        return

    def complete(side: Resumable) -> Callable[[], Awaitable[Any]]:
        async def go() -> Any:
            return await side.complete(await side.find(upload_id))
        return go

    answers = await asyncio.gather(run.op(f"t{n}.complete", complete(here)),
                                   run.op(f"t{n}.complete'", complete(there)))
    run.note(f"t{n} tus {upload_id} completions: "
             + ", ".join(f"{o} {_short(v)}" for o, v in answers))
    docs = {v.id for o, v in answers if o == "ok"}
    if len(docs) > 1:
        raise Violation(f"two completions of upload {upload_id} made {sorted(docs)}")
    for o, v in answers:
        if o == "ok":
            run.result.acknowledged += 1
            if v.sha256 != sha:
                raise Violation(f"upload {upload_id} answered {v.sha256}, sent {sha}")
            run.docs.setdefault(v.id, Doc(v.id, v.version, sha))


def receiver(run: _Run, ledger: Ledger) -> None:
    """The events' one target: an in-process handler that records what it is sent and
    fails (the receiver answered an error) with the run's ``receiver_fails`` chance. Every
    worker's handler has one name (``handler:...receive``), as one receiver's would."""

    async def receive(event: Event) -> None:
        await run.point("receiver")
        run.received.append((event.subject, event.id, event.event_id))
        if run.rng.random() < run.receiver_fails:
            run.note(f"receiver refuses event {event.id}")
            raise RuntimeError("the receiver answered 503")

    for kind in EVENT_TYPES:
        ledger.on(kind)(receive)


async def deliverer(run: _Run, n: int, rounds: int) -> None:
    """A delivery worker: ``Delivery.run_once`` now and then."""
    from tests.sim.sim import _short

    ledger = run.ledger()
    receiver(run, ledger)
    for _ in range(rounds):
        await asyncio.sleep(run.rng.choice((1.0, 10.0, 70.0)))
        run.note(f"delivery{n} runs")
        outcome, value = await run.op(f"delivery{n}", Delivery(ledger).run_once)
        run.note(f"delivery{n}: {outcome} {_short(value)}")


def recording_claims(run: _Run) -> Callable[[], None]:
    """``events.claim`` noting each claim's token per event, in the order claimed (what a
    tracer of the workers would see; the statements are the real ones); returns the undo."""
    real = events.claim

    async def claim(*args: Any, **kwargs: Any) -> tuple[str, list[Event]]:
        token, won = await real(*args, **kwargs)
        for event in won:
            run.claims.setdefault(event.event_id, []).append(token)
        return token, won

    events.claim = claim

    def undo() -> None:
        events.claim = real
    return undo


async def check_events(run: _Run, ledger: Ledger) -> None:
    """What the delivery side left. The mark of a ``dead`` or ``delivered`` event is its
    latest claim's (a claim whose lease lapsed has had its token replaced and marks
    nothing): of the claims that logged an attempt, the latest logged a failure if the
    event is dead, and none if it is delivered. And each subject's events were first
    received in their order (the claim takes the first undelivered event of a subject)."""
    from tests.sim.sim import Violation

    e, d = events.events, events.deliveries
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(select(e.c.event_id, e.c.state, e.c.id))).all()
        log = (await conn.execute(select(d.c.event_id, d.c.claim, d.c.outcome))).all()
    failed: dict[tuple[str, str], bool] = {}
    for event_id, claim, outcome in log:
        key = (event_id, claim)
        failed[key] = failed.get(key, False) or outcome == "failed"
    for event_id, state, seq in rows:
        if state not in (events.DEAD, events.DELIVERED):
            continue
        logged = [c for c in run.claims.get(event_id, []) if (event_id, c) in failed]
        if not logged:
            continue
        latest = logged[-1]
        if state == events.DEAD and not failed[(event_id, latest)]:
            raise Violation(f"event {seq} ({event_id}) is dead, but its latest claim "
                            f"{latest} was taken by its target (a mark under a lapsed claim)")
        if state == events.DELIVERED and failed[(event_id, latest)]:
            raise Violation(f"event {seq} ({event_id}) is delivered, but its latest claim "
                            f"{latest} was refused (a mark under a lapsed claim)")
    first: dict[str, int] = {}
    seen: set[str] = set()
    for subject, seq, event_id in run.received:
        if event_id in seen:
            continue
        seen.add(event_id)
        if seq < first.get(subject, 0):
            raise Violation(f"event {seq} of {subject} first received after event "
                            f"{first[subject]}")
        first[subject] = seq
