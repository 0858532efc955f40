"""``create_app()`` without a ledger: its lifespan opens one (migrating), runs the background
workers beside the service, and at shutdown cancels them and closes the ledger."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from blobledger import Ledger
from blobledger.api import create_app
from blobledger.config import Settings


async def test_lifespan_opens_the_ledger_and_runs_workers(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'app.db'}",
                        store_url=f"file://{tmp_path / 'blobs'}")
    seen: list[str] = []

    async def worker(ledger: Ledger) -> None:
        seen.append(f"started with {ledger.store.url}")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    app = create_app(settings=settings, workers=[worker])
    assert app.state.ledger is None
    async with app.router.lifespan_context(app):
        await asyncio.sleep(0)  # let the worker start
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            created = await client.post("/documents", params={"name": "a"}, content=b"bytes")
            assert created.status_code == 201, created.text
            doc_id = created.json()["id"]
            assert (await client.get(f"/documents/{doc_id}/content")).content == b"bytes"
            assert (await client.get("/readyz")).json() == {"status": "ready"}
        assert seen == [f"started with {settings.store_url}"]
    assert seen[-1] == "cancelled"
    assert app.state.ledger is None  # closed and released at shutdown
