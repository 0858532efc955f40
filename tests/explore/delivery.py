"""The event delivery workers in the explorer: runs of the real :class:`Delivery` (one event
per claim, so a run stops at one step at a time) to an in-process handler that records every
call and refuses while told to, and the model their claims, sends and marks are checked
against.

What each worker claimed and marked is observed by passing the delivery statements' functions
(:func:`blobledger.protocol.events.claim`, ``mark_delivered``, ``mark_failed``) through
wrappers that record their arguments and results and change nothing (:meth:`DeliveryModel.
install`). A claim is *live* from its claim until its own worker marks it (won or refused)
or its lease lapses, on the explorer's clock plus the seconds that really passed. The checks
(:meth:`DeliveryModel.check`):

- in order per subject (docs/pipeline.md): the handler is never called with an event while an
  earlier event of its subject has no successful call before it;
- no two claims of one event are live at once;
- a mark lands (updates the row) only for the event's latest claim: a lapsed worker's mark
  never lands on the claim that replaced it;
- no event is dead while a live claim of it delivered it successfully;
- an event's attempts never exceed the claims of it that reached their mark;
- settled (every run finished, the handler healthy, the clock past every lease and backoff,
  a last run delivered what was due): every event is delivered, except one that is dead after
  the handler refused it the maximum number of times, and the later events of its subject
  (a dead event holds them back).
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from blobledger.protocol import events as statements
from blobledger.protocol.events import Event, events
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import EventType
from blobledger.workers.delivery import Delivery

#: the worker (an operation's label, or ``settle``) running in this task
WORKER: contextvars.ContextVar[str] = contextvars.ContextVar("worker", default="settle")
#: how much earlier than the database the model lets a lease lapse (SQLite's clock is read
#: to the millisecond; the real seconds are measured here, not there)
MARGIN = 2.0


@dataclass(eq=False)
class Claim:
    """One worker's claim of one event."""

    worker: str
    token: str
    event_id: str
    offset: float  # the explorer's clock offset at the claim
    began: float  # time.monotonic() at the claim
    marked: bool = False  # its worker's mark ran (won or refused)

    def live(self, offset: float, lease: float) -> bool:
        elapsed = offset - self.offset + time.monotonic() - self.began
        return not self.marked and elapsed < lease - MARGIN


@dataclass(frozen=True)
class Call:
    """One call of the handler."""

    worker: str
    claim: Claim | None  # the worker's claim of the event, if it holds one
    event_id: str
    seq: int  # the event's ``id`` (its order)
    subject: str
    ok: bool


class DeliveryModel:
    """The handler, the observed claims and marks, and the checks."""

    def __init__(self, lease: float, max_attempts: int) -> None:
        self.lease = lease
        self.max_attempts = max_attempts
        self.refusing = False
        self.claims: list[Claim] = []
        self.calls: list[Call] = []
        self.problems: list[str] = []  # seen inside a worker, reported at the next check
        self._saved: dict[str, Any] = {}

    # -- the handler, and the runs --------------------------------------------------------
    def register(self, ledger: Ledger) -> None:
        for kind in EventType:
            ledger.on(kind.value)(self.handler)

    async def handler(self, event: Event) -> bool:
        worker = WORKER.get()
        held = [c for c in self.claims if c.worker == worker and c.event_id == event.event_id]
        self.calls.append(Call(worker, held[-1] if held else None, event.event_id, event.id,
                               event.subject, not self.refusing))
        return not self.refusing

    @staticmethod
    async def run(ledger: Ledger, worker: str) -> None:
        """One worker's run (in an operation's task): one event per claim."""
        WORKER.set(worker)
        await Delivery(ledger, batch=1).run_once()

    # -- observing the claims and marks ---------------------------------------------------
    def install(self) -> None:
        """Pass the claim and mark functions through the recording wrappers."""
        self._saved = {name: getattr(statements, name)
                       for name in ("claim", "mark_delivered", "mark_failed")}
        claim, delivered, failed = (self._saved[n] for n in
                                    ("claim", "mark_delivered", "mark_failed"))

        async def claiming(conn: AsyncConnection, limit: int, lease: float,
                           offset: float = 0.0) -> tuple[str, list[Event]]:
            token, won = await claim(conn, limit, lease, offset)
            for event in won:
                self.claims.append(Claim(WORKER.get(), token, event.event_id, offset,
                                         time.monotonic()))
            return token, won

        async def marking_delivered(conn: AsyncConnection, event_id: str, token: str,
                                    offset: float = 0.0) -> bool:
            return self._marked(event_id, token, "delivered",
                                await delivered(conn, event_id, token, offset))

        async def marking_failed(conn: AsyncConnection, event_id: str, token: str,
                                 error: str, **kwargs: Any) -> bool:
            won = await failed(conn, event_id, token, error, **kwargs)
            return self._marked(event_id, token, "dead" if kwargs["dead"] else "failed", won)

        statements.claim = claiming
        statements.mark_delivered = marking_delivered
        statements.mark_failed = marking_failed

    def uninstall(self) -> None:
        for name, function in self._saved.items():
            setattr(statements, name, function)
        self._saved = {}

    def _marked(self, event_id: str, token: str, how: str, won: bool) -> bool:
        of_event = [c for c in self.claims if c.event_id == event_id]
        mine = [c for c in of_event if c.token == token]
        if not mine:
            self.problems.append(f"a mark ({how}) of {event_id} by a token never seen claim it")
            return won
        mine[-1].marked = True
        if won and of_event[-1] is not mine[-1]:
            self.problems.append(
                f"{mine[-1].worker}'s {how} mark of {event_id} landed though its claim was "
                f"replaced by {of_event[-1].worker}'s")
        return won

    def holding(self, worker: str) -> str | None:
        """The event ``worker``'s latest claim holds, unmarked (None: none)."""
        mine = [c for c in self.claims if c.worker == worker]
        return mine[-1].event_id if mine and not mine[-1].marked else None

    # -- the checks -----------------------------------------------------------------------
    async def check(self, conn: AsyncConnection, offset: float, *,
                    settled: bool = False) -> str | None:
        """The first violation, or None."""
        if self.problems:
            return self.problems[0]
        rows = list((await conn.execute(select(
            events.c.id, events.c.event_id, events.c.subject, events.c.state,
            events.c.attempts).order_by(events.c.id))).all())
        for found in (self._order(rows), self._claims(rows, offset),
                      self._settled(rows) if settled else None):
            if found is not None:
                return found
        return None

    def _order(self, rows: list[Any]) -> str | None:
        earlier: dict[str, list[tuple[int, str]]] = {}  # subject -> its (seq, event id)s
        for row in rows:
            earlier.setdefault(row.subject, []).append((row.id, row.event_id))
        taken: set[str] = set()
        for call in self.calls:
            for seq, event_id in earlier.get(call.subject, []):
                if seq < call.seq and event_id not in taken:
                    return (f"{call.worker} sent {call.event_id} (#{call.seq}) before the "
                            f"earlier {event_id} (#{seq}) of {call.subject} was taken")
            if call.ok:
                taken.add(call.event_id)
        return None

    def _claims(self, rows: list[Any], offset: float) -> str | None:
        for row in rows:
            claims = [c for c in self.claims if c.event_id == row.event_id]
            live = [c for c in claims if c.live(offset, self.lease)]
            if len(live) > 1:
                return (f"{row.event_id} is held by live claims of "
                        f"{', '.join(c.worker for c in live)} at once")
            if row.state == statements.DEAD:
                took = [c for c in live if any(
                    call.claim is c and call.ok for call in self.calls)]
                if took:
                    return (f"{row.event_id} is dead, though {took[0].worker}'s claim, still "
                            "live, delivered it")
            marked = sum(c.marked for c in claims)
            if row.attempts > marked:
                return (f"{row.event_id} counts {row.attempts} attempts; only {marked} "
                        "claims of it reached their mark")
        return None

    def _settled(self, rows: list[Any]) -> str | None:
        blocked: set[str] = set()  # subjects held back by a dead event
        for row in rows:
            if row.subject in blocked and row.state == statements.PENDING:
                continue
            refused = sum(1 for call in self.calls
                          if call.event_id == row.event_id and not call.ok)
            if row.state == statements.DEAD and refused >= self.max_attempts:
                blocked.add(row.subject)
                continue
            if row.state != statements.DELIVERED:
                return (f"settled, {row.event_id} (#{row.id}, {row.subject}) is {row.state} "
                        f"after {row.attempts} attempts ({refused} refused)")
        return None


async def deliver_all(ledger: Ledger) -> int:
    """Runs until one claims nothing (settled: the handler healthy, everything due); how
    many events they delivered."""
    delivered = 0
    while (report := await Delivery(ledger, batch=1).run_once()).claimed:
        delivered += report.delivered
    return delivered
