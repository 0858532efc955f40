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

from blobledger.errors import BlobNotFound, IntegrityError, IntentLost, StoreUnavailable
from blobledger.protocol import events
from blobledger.protocol.events import Event
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import UploadState
from blobledger.uploads.direct import DirectUploads
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
    from tests.sim.sim import _short

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

    beside: list[Awaitable[tuple[str, Any]]] = []
    # the client's DELETE racing its completion (no draw without: the schedules stay)
    if run.config.terminate and run.rng.random() < run.config.terminate:
        async def terminate() -> None:
            await there.terminate(await there.find(upload_id))
        beside.append(run.op(f"t{n}.terminate", terminate))
    answers = await _completed_twice(run, f"t{n}", upload_id, sha, complete(here),
                                     complete(there), beside)
    if beside:
        await _terminated(run, here.ledger, upload_id, answers)
        answers = answers[:2]
    if (run.config.store == "local" and not run.config.sweepers and not run.config.reconcilers
            and all(o != "ok" for o, _ in answers)
            and any(isinstance(v, StoreUnavailable) for o, v in answers if o == "error")):
        await _completed_again(run, n, upload_id, sha, complete(here))


async def _terminated(run: _Run, ledger: Ledger, upload_id: str,
                      answers: list[tuple[str, Any]]) -> None:
    """A termination answered success leaves the upload not open (a termination lost with
    its connection is never told success while the upload still runs). Beside a completion
    that made the document it may be answered success too: tus answers a DELETE of a
    finished upload 204, and deletes nothing (the read-back checks the document stays)."""
    from tests.sim.sim import Violation

    if answers[2][0] != "ok":
        return
    again = await ledger.transitions.find_upload(upload_id)
    if again is not None and again.state == UploadState.OPEN and not again.expired:
        raise Violation(f"upload {upload_id}: its termination answered success, the upload "
                        "is still open")


async def _completed_again(run: _Run, n: int, upload_id: str, sha: str,
                           complete: Callable[[], Awaitable[Any]]) -> None:
    """The client's retried completion of a tus upload whose publication the store refused
    (a full disk): with no sweeper or reconciler running nothing else ends the upload, so
    its parts are still there to publish (the local store keeps them when a publication
    fails) and the retry is never told a part is missing."""
    from tests.sim.sim import Doc, Violation, _short

    outcome, value = await run.op(f"t{n}.complete''", complete)
    run.note(f"t{n} {upload_id} completed again: {outcome} {_short(value)}")
    if outcome == "error" and isinstance(value, BlobNotFound):
        raise Violation(f"upload {upload_id}, its publication refused, cannot be completed "
                        f"again: {value}")
    if outcome == "ok":
        run.result.acknowledged += 1
        if value.sha256 != sha:
            raise Violation(f"upload {upload_id} answered {value.sha256}, sent {sha}")
        run.docs.setdefault(value.id, Doc(value.id, value.version, sha))


async def _completed_twice(run: _Run, label: str, upload_id: str, sha: str,
                           here: Callable[[], Awaitable[Any]],
                           there: Callable[[], Awaitable[Any]],
                           beside: list[Awaitable[tuple[str, Any]]] | None = None,
                           ) -> list[tuple[str, Any]]:
    """An upload's completion sent to two processes at once (and ``beside`` them, other
    operations of the upload: their answers follow): the answers that are documents name
    one document with the bytes sent, and neither tells the honest client its bytes are not
    what it declared."""
    from tests.sim.sim import Doc, Violation, _short

    answers = await asyncio.gather(run.op(f"{label}.complete", here),
                                   run.op(f"{label}.complete'", there), *(beside or []))
    run.note(f"{label} {upload_id} completions: "
             + ", ".join(f"{o} {_short(v)}" for o, v in answers))
    docs = {v.id for o, v in answers[:2] if o == "ok"}
    if len(docs) > 1:
        raise Violation(f"two completions of upload {upload_id} made {sorted(docs)}")
    for o, v in answers[:2]:
        if o == "error" and isinstance(v, IntegrityError):
            raise Violation(f"a completion of upload {upload_id}, whose bytes are the ones "
                            f"declared, was answered {v!r}")
        if o == "ok":
            run.result.acknowledged += 1
            if v.sha256 != sha:
                raise Violation(f"upload {upload_id} answered {v.sha256}, sent {sha}")
            run.docs.setdefault(v.id, Doc(v.id, v.version, sha))
    return list(answers)


async def direct_writer(run: _Run, n: int) -> None:
    """Direct uploads (the store has no URL of its own here: the bytes go through
    ``receive``, as ``serve``'s own URL takes them), each declared with its size and SHA-256
    and completed by two processes at once (a client retrying ``complete``)."""
    from tests.sim.sim import _short

    here, there = DirectUploads(run.ledger()), DirectUploads(run.ledger())
    for i in range(run.config.ops):
        name = run.rng.choice(run.names) + f"-d{n}.{i}"
        data = f"d{n} upload{i} {run.rng.getrandbits(32)}".encode()
        sha = hashlib.sha256(data).hexdigest()
        run.note(f"d{n} direct {name} sha={sha[:8]}")

        async def begin(name: str = name, data: bytes = data, sha: str = sha) -> str:
            began = await here.begin(name, len(data), "text/plain", sha256=sha)
            assert began.token is not None  # the simulated stores have no URL of their own
            await here.receive(began.upload.id, began.token, _body(data))
            return began.upload.id

        outcome, upload_id = await run.op(f"d{n}.begin", begin)
        run.note(f"d{n} direct {name}: {outcome} "
                 f"{upload_id if outcome == 'ok' else _short(upload_id)}")
        if outcome != "ok":
            continue

        def complete(side: DirectUploads, upload_id: str = upload_id
                     ) -> Callable[[], Awaitable[Any]]:
            return lambda: side.complete(upload_id)

        await _completed_twice(run, f"d{n}", upload_id, sha, complete(here), complete(there))


async def racing_writer(run: _Run, n: int) -> None:
    """Creates under an idempotency key whose client gives up waiting after
    ``retry_after`` seconds and sends the create again, to another process, while the first
    attempt still runs (paused): the retry takes the intent over once the first attempt's
    lease and the margin have passed. Both answers, if any, name one document and checksum.
    With no sweeper and no reconciler running, nothing but an attempt of the same key can
    take an intent, and only the later one takes it from the earlier: the latest attempt of
    a key is never told its intent was lost."""
    from tests.sim.sim import Doc, Violation, _short

    first, second = run.ledger(), run.ledger()
    for i in range(run.config.ops):
        key, name = f"r{n}-{i}", run.rng.choice(run.names) + f"-r{n}.{i}"
        data = f"r{n} op{i} {run.rng.getrandbits(32)}".encode()
        sha = hashlib.sha256(data).hexdigest()

        def create(ledger: Ledger, name: str = name, data: bytes = data,
                   key: str = key) -> Callable[[], Awaitable[Any]]:
            return lambda: ledger.create(name, data, content_type="text/plain",
                                         idempotency_key=key)

        run.note(f"r{n} create {name} key={key} sha={sha[:8]}")
        attempts = [asyncio.ensure_future(run.op(f"r{n}.create", create(first)))]
        done, _ = await asyncio.wait(attempts, timeout=run.config.retry_after)
        if not done:
            run.note(f"r{n} no answer after {run.config.retry_after:.0f}s: {key} sent again")
            attempts.append(asyncio.ensure_future(run.op(f"r{n}.create'", create(second))))
        answers = [await attempt for attempt in attempts]
        run.note(f"r{n} {key}: " + ", ".join(f"{o} {_short(v)}" for o, v in answers))
        for outcome, value in answers:
            if outcome != "ok":
                continue
            run.result.acknowledged += 1
            known = run.keys.setdefault(key, (value.id, sha))
            if known != (value.id, value.sha256):
                raise Violation(f"key {key} answered {value.id} {value.sha256}, first {known}")
            run.docs.setdefault(value.id, Doc(value.id, value.version, sha))
        outcome, value = answers[-1]
        if (outcome == "error" and isinstance(value, IntentLost) and not run.config.sweepers
                and not run.config.reconcilers):
            raise Violation(f"the latest attempt under key {key} was told its intent was "
                            "lost, though no sweeper runs (an earlier attempt took it)")


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


def _counted_once(seq: int, event_id: str, state: str, attempts: int,
                  numbers: set[int]) -> None:
    """Each claim numbers its attempt one past the event's count, which only a mark under
    the event's latest claim moves, and a failed mark's claim logged its attempt first: the
    numbers logged run 1, 2, ... without a gap, and the count is at most the highest (one
    more for a delivered event whose last claim found nothing left to send). A mark under a
    lapsed claim counts an attempt twice."""
    from tests.sim.sim import Violation

    highest = max(numbers, default=0)
    if numbers != set(range(1, highest + 1)) or \
            attempts > highest + (state == events.DELIVERED):
        raise Violation(f"event {seq} ({event_id}) counts {attempts} attempts, its attempts "
                        f"logged are numbered {sorted(numbers)} (an attempt counted twice)")


def recording_claims(run: _Run) -> Callable[[], None]:
    """``events.claim`` noting each claim's token per event (what a tracer of the workers
    would see; the statements are the real ones); returns the undo. A claim counts once its
    transaction committed: when its worker reaches ``events.after_claim`` (:func:`claimed`),
    which may be long after (a pause as the connection goes back to its pool), so claims are
    ordered by their statement's turn, not by when they are counted."""
    real = events.claim

    async def claim(*args: Any, **kwargs: Any) -> tuple[str, list[Event]]:
        token, won = await real(*args, **kwargs)
        # ordered by its statement (SQLite's writers take turns), counted once committed
        run.unconfirmed[asyncio.current_task()] = [
            (next(run.claim_order), e.event_id, token) for e in won]
        return token, won

    events.claim = claim

    def undo() -> None:
        events.claim = real
    return undo


def claimed(run: _Run) -> None:
    """The current task's claim committed (it passes ``events.after_claim``)."""
    for order, event_id, token in run.unconfirmed.pop(asyncio.current_task(), []):
        run.claims.setdefault(event_id, []).append((order, token))


async def check_events(run: _Run, ledger: Ledger) -> None:
    """What the delivery side left. A ``dead`` or ``delivered`` event was marked by its
    latest claim (a claim whose lease lapsed has had its token replaced and marks nothing;
    no claim wins a marked event): that claim logged a failed attempt if the event is dead,
    none if it is delivered (and the event's target took it, under some claim). And each
    subject's events were first received in their order (the claim takes the first
    undelivered event of a subject only)."""
    from tests.sim.sim import Violation

    e, d = events.events, events.deliveries
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(select(e.c.event_id, e.c.state, e.c.id,
                                          e.c.attempts))).all()
        log = (await conn.execute(select(d.c.event_id, d.c.claim, d.c.outcome,
                                         d.c.attempt_no))).all()
    failed = {(event_id, claim) for event_id, claim, outcome, _ in log if outcome == "failed"}
    took = {event_id for event_id, _, outcome, _ in log if outcome != "failed"}
    numbered: dict[str, set[int]] = {}
    for event_id, _, _, attempt_no in log:
        numbered.setdefault(event_id, set()).add(attempt_no)
    for event_id, state, seq, attempts in rows:
        _counted_once(seq, event_id, state, attempts, numbered.get(event_id, set()))
        if state not in (events.DEAD, events.DELIVERED) or not run.claims.get(event_id):
            continue
        latest = max(run.claims[event_id])[1]
        if state == events.DEAD and (event_id, latest) not in failed:
            raise Violation(f"event {seq} ({event_id}) is dead, but its latest claim "
                            f"{latest} logged no failure (a mark under a lapsed claim)")
        if state == events.DELIVERED and ((event_id, latest) in failed
                                          or event_id not in took):
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
