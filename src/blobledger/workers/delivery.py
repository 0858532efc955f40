"""The delivery worker: every event to every target, at least once, its state in the database.

Targets are the ledger's in-process handlers for the event's type (``@ledger.on(...)``) and
the configured webhooks (``BLOBLEDGER_WEBHOOK_URLS``, signed per Standard Webhooks with
``BLOBLEDGER_WEBHOOK_SECRET``). One :meth:`Delivery.run_once` claims due events in batches
until none is due:

1. **Claim** (:func:`blobledger.protocol.events.claim`): pending events due now whose lease
   has lapsed, oldest first, and only the first undelivered event of each subject (a
   document's events are delivered in the order they were written; a failing one holds the
   later ones back until it is delivered, or replayed once dead). The claim writes a token of
   its own and a lease (``BLOBLEDGER_EVENT_LEASE``).
2. **Send** to every target that has not yet taken the event (the attempt log says which
   did), logging each attempt (target, start, end, outcome, status, error).
3. **Mark**, by compare-and-set on the claim's token: ``delivered`` when every target took
   it; else the attempt counted and the event due again after the backoff
   (``BLOBLEDGER_EVENT_BACKOFF``, doubled per attempt), or ``dead`` after
   ``BLOBLEDGER_EVENT_MAX_ATTEMPTS``.

A worker that dies or pauses anywhere leaves the event ``pending`` and claimed until the lease
lapses; another worker then claims it and sends it again (the same ``webhook-id``: receivers
deduplicate on it). A paused worker that wakes after that can no longer mark the event: its
token was replaced, so it neither marks another's event delivered nor counts an attempt twice.

Failpoints: ``events.after_claim`` (a batch claimed, nothing sent), ``events.before_log`` (a
target called, its attempt not yet logged), ``events.after_send`` (every target called, the
event not yet marked) and ``events.after_mark``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy.exc import SQLAlchemyError

from blobledger import failpoints
from blobledger._base import metrics, webhooks
from blobledger._base.redact import redact_url
from blobledger.config import MAX_EVENT_BACKOFF, Settings
from blobledger.errors import BlobLedgerError
from blobledger.protocol import events
from blobledger.protocol.events import Event
from blobledger.protocol.ledger import Ledger
from blobledger.workers.supervisor import Worker

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("blobledger.delivery")

#: a target's name in the attempt log
Target = tuple[str, Callable[[Event], Awaitable[int | None]]]  # the HTTP status, if any


@dataclass
class DeliveryReport:
    """What one run did; ``to_log()`` is its one summary line."""

    claimed: int = 0
    delivered: int = 0
    failures: int = 0  # failed attempts to one target
    retried: int = 0  # events due again after a backoff
    dead: int = 0  # events moved to the dead-letter state
    lost: int = 0  # marks refused: the claim lapsed and another worker holds the event
    pending: int = 0  # after the run
    dead_now: int = 0  # after the run
    lag: float | None = None  # the oldest pending event's age after the run (seconds)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    def to_log(self) -> str:
        return json.dumps({"event": "deliver", **self.as_dict()})


def backoff(settings: Settings, attempts: int) -> float:
    """The wait before the next try after ``attempts`` failed ones (at least 1)."""
    return float(min(MAX_EVENT_BACKOFF, settings.event_backoff * 2 ** max(0, attempts - 1)))


class Delivery:
    """One delivery worker over a ledger: its handlers and the configured webhooks."""

    def __init__(self, ledger: Ledger, *, client: httpx.AsyncClient | None = None,
                 batch: int | None = None) -> None:
        self.ledger = ledger
        self.settings = ledger.settings
        self.batch = batch or self.settings.event_batch
        self._client = client

    def targets(self, event: Event) -> list[Target]:
        """Where ``event`` goes: the handlers for its type, then the webhooks."""
        found: list[Target] = []
        names: set[str] = set()
        for handler in self.ledger.handlers.get(event.type, []):
            name = f"handler:{getattr(handler, '__module__', '?')}." \
                   f"{getattr(handler, '__qualname__', type(handler).__name__)}"
            while name in names:  # two handlers of one name: each its own target
                name += "'"
            names.add(name)
            found.append((name, _call(handler)))
        for url in self.settings.webhook_urls:
            found.append((f"webhook:{redact_url(url)}", self._post(url)))
        return found

    def _post(self, url: str) -> Callable[[Event], Awaitable[int | None]]:
        async def post(event: Event) -> int | None:
            body = json.dumps(event.body(), sort_keys=True).encode()
            assert self.settings.webhook_secret is not None  # the settings insist
            headers = webhooks.headers(self.settings.webhook_secret, event.event_id, body)
            if self._client is None:
                import httpx  # here: a service without webhooks never loads it

                self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False)
            limit = self.settings.event_timeout
            try:
                async with asyncio.timeout(limit):  # the whole call, however it trickles
                    status = await _status(self._client, url, body, headers, limit)
            except TimeoutError:
                raise _TimedOut(f"no whole answer within {limit:g}s") from None
            if not 200 <= status < 300:
                raise _Refused(status)
            return status
        return post

    async def run_once(self) -> DeliveryReport:
        """Claim and deliver due events until none is due; the run's report."""
        owned = self._client is None
        try:
            return await self._run()
        finally:
            if owned and self._client is not None:
                await self._client.aclose()
                self._client = None

    async def _run(self) -> DeliveryReport:
        report = DeliveryReport()
        started = time.monotonic()
        while True:
            async with self.ledger.db.transaction() as conn:
                token, claimed = await events.claim(conn, self.batch, self.settings.event_lease,
                                                    self.ledger.clock_offset)
            if not claimed:
                break
            report.claimed += len(claimed)
            await failpoints.hit("events.after_claim")
            if self.ledger.db.engine.dialect.name == "sqlite":
                # one writer at a time: a worker stopped at a failpoint while another of its
                # events is inside a transaction would hold the database's only write lock
                for event in claimed:
                    await self._deliver(token, event, report)
            else:  # one event per subject in a claim: they may go out together
                # each one sent, logged and marked before an error of another (the database
                # gone under its mark) ends the run: none left running behind it
                outcomes = await asyncio.gather(*(self._deliver(token, event, report)
                                                  for event in claimed),
                                                return_exceptions=True)
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
        async with self.ledger.db.transaction(readonly=True) as conn:
            counts = await events.counts(conn)
            report.lag = await events.oldest_pending(conn, self.ledger.clock_offset)
        report.pending, report.dead_now = counts[events.PENDING], counts[events.DEAD]
        report.seconds = time.monotonic() - started
        metrics.record_delivery(report)
        return report

    async def _deliver(self, token: str, event: Event, report: DeliveryReport) -> None:
        offset = self.ledger.clock_offset
        async with self.ledger.db.transaction(readonly=True) as conn:
            done = await events.succeeded_targets(conn, event.event_id)
        errors: list[str] = []
        attempt_no = event.attempts + 1
        handlers: list[Target] = []
        hooks: list[Target] = []
        for name, send in self.targets(event):
            if name not in done:
                (hooks if name.startswith("webhook:") else handlers).append((name, send))
        # the handlers one after the other, in their order; each webhook beside them, so
        # that one receiver's trouble (slow, silent) holds no other target's delivery
        outcomes = await asyncio.gather(self._attempts(event, handlers),
                                        *(self._attempts(event, [hook]) for hook in hooks))
        for name, began, ended, status, error in (o for group in outcomes for o in group):
            if error is not None:
                errors.append(f"{name}: {error}")
                report.failures += 1
            await failpoints.hit("events.before_log")
            async with self.ledger.db.transaction() as conn:
                await events.log_attempt(conn, event.event_id, attempt_no, name, token,
                                         began, ended, ok=error is None,
                                         status_code=status, error=error)
        await failpoints.hit("events.after_send")
        async with self.ledger.db.transaction() as conn:
            if not errors:
                won = await events.mark_delivered(conn, event.event_id, token, offset)
                report.delivered += won
            else:
                dead = attempt_no >= self.settings.event_max_attempts
                won = await events.mark_failed(
                    conn, event.event_id, token, "; ".join(errors), dead=dead,
                    retry_in=backoff(self.settings, attempt_no), offset=offset)
                if won and dead:
                    report.dead += 1
                    log.warning("event %s (%s) is dead after %d attempts: %s", event.event_id,
                                event.type, attempt_no, errors[-1])
                elif won:
                    report.retried += 1
        if not won:
            report.lost += 1
        await failpoints.hit("events.after_mark")


    async def _attempts(self, event: Event, targets: list[Target]) -> list[_Attempt]:
        """Each of ``targets`` sent the event in turn: (name, began, ended, status, error)."""
        done: list[_Attempt] = []
        for name, send in targets:
            began = self.ledger.clock()
            status: int | None = None
            error: str | None = None
            try:
                status = await send(event)  # what the receiver answered (a handler: None)
            except _Refused as exc:
                status, error = exc.status, f"answered {exc.status}"
            except Exception as exc:  # a handler's or a transport's failure: retried
                error = redact_url(f"{type(exc).__name__}: {exc}".strip())
            done.append((name, began, self.ledger.clock(), status, error))
        return done


#: one attempt: the target's name, its start and end, the status answered, the error
_Attempt = tuple[str, datetime, datetime, int | None, str | None]
#: the most of a webhook answer's body that is read (undecoded); nothing of it is used
ANSWER_READ = 4096


async def _status(client: httpx.AsyncClient, url: str, body: bytes,
                  headers: dict[str, str], per_read: float) -> int:
    """The status a receiver answers the POST with. Of its body at most
    :data:`ANSWER_READ` bytes are read, as they came (never decoded: a compressed answer
    costs what it weighs on the wire); the connection is dropped if it holds more."""
    async with client.stream("POST", url, content=body, headers=headers,
                             timeout=per_read) as response:
        read = 0
        async for chunk in response.aiter_raw():
            read += len(chunk)
            if read > ANSWER_READ:
                break
        return response.status_code


class _TimedOut(Exception):
    """A receiver that did not answer in full within ``BLOBLEDGER_EVENT_TIMEOUT``."""


class _Refused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"answered {status}")
        self.status = status


def _call(handler: Callable[[Event], object]) -> Callable[[Event], Awaitable[int | None]]:
    """A handler as a coroutine function: an async one awaited, a sync one run in a thread
    (it must not block the loop). False from either is a failure."""
    async def call(event: Event) -> int | None:
        if inspect.iscoroutinefunction(handler):
            result = await handler(event)
        else:
            result = await asyncio.to_thread(handler, event)
            if inspect.isawaitable(result):
                result = await result
        if result is False:
            raise RuntimeError("the handler returned False")
        return None
    return call


#: what a delivery run may fail on and be tried again at the next interval
OUTAGES = (BlobLedgerError, SQLAlchemyError, OSError)


async def deliver_forever(ledger: Ledger, *, interval: float, stop: asyncio.Event,
                          on_report: Callable[[DeliveryReport], None] | None = None) -> None:
    """Deliver every ``interval`` seconds until ``stop`` is set. A run that fails on an
    outage (the database away: :data:`OUTAGES`) is logged and tried again next time; any
    other exception (a bug) ends the loop, as the sweeper's and the retag worker's do: under
    ``serve``'s supervisor it is logged with its traceback and the worker restarted with
    backoff. A target's failure is never one: it is the event's failed attempt."""
    delivery = Delivery(ledger)
    while not stop.is_set():
        try:
            report = await delivery.run_once()
            if on_report is not None:
                on_report(report)
        except OUTAGES as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            log.warning("event delivery failed: %s: %s; trying again in %.1fs",
                        type(exc).__name__, first, interval)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)


def background_delivery(settings: Settings) -> Worker | None:
    """A worker for ``serve`` delivering events every ``event_interval`` while webhooks are
    configured (None: no webhook, no worker; in-process handlers live in an application's
    own process, which runs :func:`deliver_forever` itself)."""
    if not settings.webhook_urls:
        return None
    interval = settings.event_interval

    async def delivery(ledger: Ledger, beat: Callable[[], None]) -> None:
        await deliver_forever(ledger, interval=interval, stop=asyncio.Event(),
                              on_report=lambda _: beat())

    return Worker("delivery", interval, delivery)
