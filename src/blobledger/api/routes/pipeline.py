"""``/ops/pipeline``, ``/ops/events``, ``/ops/held``: what happens after a write (the web
page's pipeline view reads these).

- ``GET /ops/pipeline``: how the pipeline is set up (the variants by name and box, the
  processors, the hold policy, how many webhook targets) and where it stands (events by
  delivery state and the oldest pending one's wait, held documents and the oldest one's);
- ``GET /ops/events``: the latest events, newest first, filtered by ``state`` and ``type``.
  An event's ``data`` and ``subject`` name a document (a held or rejected one too), so a
  caller that may only read gets them as None, as ``/ops/overview`` gives it counts without
  names;
- ``POST /ops/events/{event_id}/replay`` (``write``): a dead (or delivered) event sent again
  to every target (``blobledger events replay``), 409 for one still pending;
- ``GET /ops/held``: the caller's own held and rejected documents, with each processor's
  state and a rejection's reason (``GET /documents/{id}`` tells the same of one; nobody
  else's are listed: a held document is readable by nobody but its writer).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from blobledger.api.auth import require, scopes_presented
from blobledger.api.openapi import problems
from blobledger.api.problems import Problem
from blobledger.api.routes import ledger_of, settings_of
from blobledger.api.routes.documents import writer_of
from blobledger.protocol import events

router = APIRouter(prefix="/ops", tags=["operations"])

EventState = Literal["pending", "delivered", "dead"]


@router.get("/pipeline", dependencies=[Depends(require("read"))], responses=problems(503))
async def pipeline(request: Request) -> dict[str, Any]:
    """The pipeline's settings (variants, processors, hold policy, webhook targets) and its
    queues: events by delivery state, held documents, each with its oldest one's wait."""
    ledger = ledger_of(request)
    settings = settings_of(request)
    async with ledger.db.transaction(readonly=True) as conn:
        counts = await events.counts(conn)
        lag = await events.oldest_pending(conn, ledger.clock_offset)
    held, waited = await ledger.held.waiting()
    return {
        "variants": [{"name": spec.name, "width": spec.width, "height": spec.height}
                     for spec in settings.variants.values()],
        "variant_format": settings.variant_format,
        "processors": list(settings.processors),
        "hold": settings.hold, "hold_prefixes": list(settings.hold_prefixes),
        "webhook_targets": len(settings.webhook_urls),
        "event_max_attempts": settings.event_max_attempts,
        "events": {**counts, "lag_seconds": lag},
        "held": {"count": held, "oldest_seconds": waited},
    }


@router.get("/events", dependencies=[Depends(require("read"))], responses=problems(503))
async def list_events(
    request: Request,
    state: Annotated[EventState | None, Query()] = None,
    type: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 25,
) -> dict[str, Any]:
    """The latest events, newest first (``state``, ``type``: only those), each with its
    delivery state, attempts and last error; ``data`` and ``subject`` for a caller that
    may write only."""
    ledger = ledger_of(request)
    async with ledger.db.transaction(readonly=True) as conn:
        found = await events.listing(conn, state=state, type=type, limit=limit, newest=True)
    named = "write" in scopes_presented(request)
    items = [event.to_json() for event in found]
    if not named:
        for item in items:
            item.update(subject=None, data=None)
    return {"items": items}


@router.post("/events/{event_id}/replay", dependencies=[Depends(require("write"))],
             responses=problems(404, 409, 503))
async def replay_event(request: Request, event_id: str) -> dict[str, Any]:
    """A dead or delivered event back to ``pending``, due now, its attempts reset: every
    target is sent it again (its attempt log is kept). 409 for an event still pending."""
    ledger = ledger_of(request)
    if len(event_id) > 64 or not event_id.isascii() or not event_id.isprintable():
        raise Problem(404, "not-found", f"no event {event_id!r}")
    async with ledger.db.transaction() as conn:
        replayed = await events.replay(conn, event_id, ledger.clock_offset)
        found = await events.find(conn, event_id)
    if found is None:
        raise Problem(404, "not-found", f"no event {event_id!r}")
    if not replayed:
        raise Problem(409, "event-pending", f"event {event_id} is still pending: it is "
                      "delivered (or dies) on its own; replay a dead or delivered one",
                      state=found[0].state)
    event, log = found
    return {**event.to_json(), "log": [attempt.to_json() for attempt in log]}


@router.get("/held", dependencies=[Depends(require("read"))], responses=problems(503))
async def held_documents(
    request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """The caller's held documents (newest first), then its rejected ones (latest first):
    each with ``status``, every processor's state and a rejection's ``reason``."""
    writer = writer_of(request)
    if writer is None:
        return {"items": []}
    found = await ledger_of(request).held.of_owner(writer, limit)
    return {"items": [state.to_json() for state in found]}
