"""``/ops/pipeline``, ``/ops/events`` (and a dead event's replay) and ``/ops/held``: what the
page's Pipeline view reads, with a read token and a write token, each writer seeing its own
held and rejected documents only."""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from blobledger import Ledger
from blobledger.protocol import events
from blobledger.workers.processing import ProcessingWorker
from tests.api.conftest import client_for, problem
from tests.held.conftest import PDF, PNG

READER = {"Authorization": "Bearer reader-token"}
WRITER = {"Authorization": "Bearer writer-token"}
OTHER = {"Authorization": "Bearer other-writer"}


def _pipeline(ledger: Ledger) -> Ledger:
    settings = ledger.settings.with_(
        api_tokens={"reader-token": frozenset({"read"}),
                    "writer-token": frozenset({"read", "write"}),
                    "other-writer": frozenset({"read", "write"})},
        processors=("content-type",), variants="thumb=64x64,big=512x512")
    return Ledger(ledger.db, ledger.store, settings)  # shares (and leaves open) db and store


async def test_events_their_replay_and_each_writers_held_documents(ledger: Ledger) -> None:
    gated = _pipeline(ledger)
    async with client_for(gated, gated.settings) as client:
        async def create(name: str, data: bytes, who: dict[str, str],
                         hold: bool) -> dict[str, Any]:
            response = await client.post(
                "/documents", params={"name": name, "hold": str(hold).lower()}, content=data,
                headers={**who, "Content-Type": "image/png"})
            assert response.status_code == 201, response.text
            return dict(response.json())

        ready = await create("pipe/ready.png", PNG, WRITER, False)
        fake = await create("pipe/fake.png", PDF, WRITER, True)
        await ProcessingWorker(gated).run_once()  # rejects the PDF called a PNG
        held = await create("pipe/held.png", PNG, WRITER, True)
        theirs = await create("pipe/theirs.png", PNG, OTHER, True)
        assert fake["status"] == held["status"] == theirs["status"] == "held"

        setup = (await client.get("/ops/pipeline", headers=READER)).json()
        assert setup["variants"] == [{"name": "thumb", "width": 64, "height": 64},
                                     {"name": "big", "width": 512, "height": 512}]
        assert setup["processors"] == ["content-type"] and setup["webhook_targets"] == 0
        assert setup["held"]["count"] == 2 and setup["held"]["oldest_seconds"] >= 0
        # ready's document.ready, fake's document.rejected
        assert (setup["events"]["pending"], setup["events"]["dead"]) == (2, 0)

        # newest first; names for a caller that may write only
        listed = (await client.get("/ops/events", headers=WRITER)).json()["items"]
        assert [e["type"] for e in listed] == ["document.rejected", "document.ready"]
        assert listed[1]["data"]["name"] == "pipe/ready.png"
        assert listed[1]["subject"] == ready["id"]
        assert listed[0]["data"]["reason"].startswith("declared image/png")
        hidden = (await client.get("/ops/events", headers=READER)).json()["items"]
        assert [(e["data"], e["subject"]) for e in hidden] == [(None, None), (None, None)]
        assert [e["id"] for e in hidden] == [e["id"] for e in listed]
        problem(await client.get("/ops/events", params={"state": "lost"}, headers=READER),
                400, "invalid-input")

        # a pending event is not replayed; a dead one is, by a write token only
        event_id = listed[1]["id"]
        problem(await client.post(f"/ops/events/{event_id}/replay", headers=WRITER), 409,
                "event-pending")
        async with gated.db.transaction() as conn:
            await conn.execute(update(events.events).where(
                events.events.c.event_id == event_id).values(
                state="dead", attempts=3, last_error="webhook: answered 500"))
        dead = (await client.get("/ops/events", params={"state": "dead"},
                                 headers=READER)).json()["items"]
        assert [(e["id"], e["attempts"], e["last_error"]) for e in dead] == [
            (event_id, 3, "webhook: answered 500")]
        problem(await client.post(f"/ops/events/{event_id}/replay", headers=READER), 403,
                "forbidden")
        replayed = await client.post(f"/ops/events/{event_id}/replay", headers=WRITER)
        assert replayed.status_code == 200, replayed.text
        assert (replayed.json()["state"], replayed.json()["attempts"]) == ("pending", 0)
        assert (await client.get("/ops/events", params={"state": "dead"},
                                 headers=READER)).json()["items"] == []
        problem(await client.post("/ops/events/evt_nope/replay", headers=WRITER), 404,
                "not-found")

        # each writer sees its own held and rejected documents, a reader none
        mine = (await client.get("/ops/held", headers=WRITER)).json()["items"]
        assert [(d["id"], d["status"]) for d in mine] == [(held["id"], "held"),
                                                          (fake["id"], "rejected")]
        assert mine[0]["processors"] == {"content-type": "pending"}
        assert mine[0]["name"] == "pipe/held.png" and mine[0]["reason"] is None
        assert mine[1]["processors"] == {"content-type": "rejected"}
        assert mine[1]["reason"].startswith("declared image/png, but the bytes are")
        other = (await client.get("/ops/held", headers=OTHER)).json()["items"]
        assert [d["id"] for d in other] == [theirs["id"]]
        assert (await client.get("/ops/held", headers=READER)).json()["items"] == []
        problem(await client.get("/ops/held"), 401, "unauthorized")
