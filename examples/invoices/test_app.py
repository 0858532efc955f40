"""The example application's own tests: over HTTP (in-process), on SQLite and PostgreSQL with
local disk and Azurite (the four combinations), with real commits. Create, read, replace,
remove and delete an invoice's PDF; a request that fails after staging (a duplicate number)
shows nothing and leaves bytes only until the sweeper; the invariants hold throughout."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from tests.conftest import azurite, new_container
from tests.support.services import Azurite, create_database, drop_database

__all__ = ["azurite"]  # the session's Azurite, shared with the main suite

from blobledger.config import Settings
from blobledger.protocol.ledger import Ledger
from blobledger.stores.azure.settings import AzureSettings
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from examples.invoices.app import create_app

PDF = b"%PDF-1.7\n" + b"0123456789" * 20_000


@pytest.fixture(params=[f"{d}-{s}" for d in ("sqlite", "postgresql")
                        for s in ("local", "azure")])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FastAPI]:
    database, store = request.param.split("-")
    url = (f"sqlite:///{tmp_path / 'invoices.db'}" if database == "sqlite"
           else await create_database())
    settings = Settings(database_url=url, store_url=f"file://{tmp_path / 'blobs'}",
                        upload_deadline=60, sweep_after=180, delete_grace=0)
    if store == "azure":
        azurite: Azurite = request.getfixturevalue("azurite")
        settings = settings.with_(
            store_url=f"azure://{new_container()}",
            azure=AzureSettings(connection_string=azurite.connection_string))
    application = create_app(settings)
    try:
        async with application.router.lifespan_context(application):
            yield application
    finally:
        if database == "postgresql":
            await drop_database(url)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://invoices") as client:
        yield client


async def settle(ledger: Ledger) -> None:
    ledger.clock_offset = ledger.settings.sweep_after + 3600
    await Sweeper(ledger).run_once()
    ledger.clock_offset = 0


async def test_an_invoice_and_its_pdf(app: FastAPI, client: httpx.AsyncClient) -> None:
    ledger: Ledger = app.state.ledger
    created = await client.post("/invoices", data={"number": "INV-1"},
                                files={"pdf": ("inv-1.pdf", PDF, "application/pdf")})
    assert created.status_code == 201, created.text
    invoice = created.json()
    assert invoice["pdf"]["size"] == len(PDF) and invoice["pdf"]["filename"] == "inv-1.pdf"
    got = await client.get(f"/invoices/{invoice['id']}/pdf")
    assert got.content == PDF and got.headers["content-type"] == "application/pdf"

    replaced = await client.put(f"/invoices/{invoice['id']}/pdf",
                                files={"pdf": ("v2.pdf", b"%PDF v2", "application/pdf")})
    assert replaced.json()["pdf"]["filename"] == "v2.pdf"
    assert (await client.get(f"/invoices/{invoice['id']}/pdf")).content == b"%PDF v2"
    removed = await client.delete(f"/invoices/{invoice['id']}/pdf")
    assert removed.json()["pdf"] is None
    assert (await client.get(f"/invoices/{invoice['id']}/pdf")).status_code == 404
    assert (await client.delete(f"/invoices/{invoice['id']}")).status_code == 204
    assert (await client.get(f"/invoices/{invoice['id']}")).status_code == 404

    await settle(ledger)
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


async def test_a_failed_request_shows_nothing(app: FastAPI, client: httpx.AsyncClient) -> None:
    ledger: Ledger = app.state.ledger
    first = await client.post("/invoices", data={"number": "INV-2"},
                              files={"pdf": ("a.pdf", PDF, "application/pdf")})
    assert first.status_code == 201
    clash = await client.post("/invoices", data={"number": "INV-2"},
                              files={"pdf": ("b.pdf", b"%PDF other", "application/pdf")})
    assert clash.status_code == 409  # staged, then the transaction failed: nothing visible
    report = await check(ledger)
    assert report.ok and report.attached == 1 and report.blob_rows["pending"] == 1
    await settle(ledger)  # the staged PDF that no invoice holds is swept
    report = await check(ledger, settled=True)
    assert report.ok and report.blob_rows == {"attached": 1}, report.render()
    assert (await client.get(f"/invoices/{first.json()['id']}/pdf")).content == PDF
