"""An upload whose writer was paused while the sweeper took its intent is answered as
abandoned (503 with Retry-After: the client may retry), not as a storage failure."""

from __future__ import annotations

import asyncio

import httpx

from blobledger import Ledger
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import leftovers, problem
from tests.support.holds import stalling


async def test_an_upload_swept_while_paused_is_abandoned(
    ledger: Ledger, client: httpx.AsyncClient
) -> None:
    body, sent, gate = stalling(b"the first part, ", b"then the rest")
    request = asyncio.create_task(client.post(
        "/documents", params={"name": "paused.txt"}, content=body,
        headers={"Content-Type": "text/plain"}))
    await asyncio.wait_for(sent.wait(), 10)
    ledger.clock_offset = ledger.settings.sweep_after + 1
    assert (await Sweeper(ledger).run_once()).swept == 1
    gate.set()
    response = await asyncio.wait_for(request, 10)
    problem(response, 503, "upload-abandoned")
    assert response.headers["Retry-After"]
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
    retried = await client.post("/documents", params={"name": "paused.txt"}, content=b"again",
                                headers={"Content-Type": "text/plain"})
    assert retried.status_code == 201, retried.text
