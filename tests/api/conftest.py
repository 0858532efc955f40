"""In-process HTTP tests: the app over the parametrised ``ledger`` fixture, via ASGITransport."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.api import create_app
from blobledger.config import Settings
from blobledger.protocol.models import BlobRow, DocumentRow


def client_for(ledger: Ledger, settings: Settings | None = None) -> httpx.AsyncClient:
    app = create_app(ledger, settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.fixture
async def client(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(ledger) as instance:
        yield instance


async def leftovers(ledger: Ledger) -> dict[str, list[str]]:
    """What a refused request may have left: document and blob rows (by status) and stored
    blobs (by tag state)."""
    async with ledger.db.session() as session:
        docs = (await session.execute(select(DocumentRow.status))).scalars().all()
        blobs = (await session.execute(select(BlobRow.state))).scalars().all()
    stored = [(info.tags or {}).get("state", "") async for info in ledger.store.list()]
    return {"documents": sorted(docs), "blobs": sorted(blobs), "stored": sorted(stored)}


async def assert_nothing_visible(ledger: Ledger) -> None:
    """Nothing but, at most, a pending intent the sweeper owns."""
    left = await leftovers(ledger)
    assert set(left["documents"]) <= {"pending"}, left
    assert set(left["blobs"]) <= {"pending"}, left
    assert set(left["stored"]) <= {"pending"}, left


def problem(response: httpx.Response, status: int, kind: str | None = None) -> dict[str, object]:
    """Assert an RFC 9457 problem document with that status (and type), and return it."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/problem+json", response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"], body
    if kind is not None:
        assert body["type"] == f"urn:blobledger:problem:{kind}", body
    return dict(body)
