"""Held documents over HTTP: every read route answers 404 to a reader while the document is
held; its writer (the token that created it) is told its state, and a rejection's reason."""

from __future__ import annotations

import httpx

from blobledger.config import Settings
from blobledger.workers.processing import ProcessingWorker
from tests.api.conftest import client_for, problem
from tests.held.conftest import PDF, PNG, LedgerFactory

TOKENS = {"writer-token": frozenset({"read", "write"}),
          "reader-token": frozenset({"read", "write"})}
WRITER = {"Authorization": "Bearer writer-token"}
READER = {"Authorization": "Bearer reader-token"}


async def not_found_everywhere(client: httpx.AsyncClient, doc_id: str,
                               headers: dict[str, str]) -> None:
    for method, path in (("GET", f"/documents/{doc_id}"), ("HEAD", f"/documents/{doc_id}"),
                         ("GET", f"/documents/{doc_id}/content"),
                         ("HEAD", f"/documents/{doc_id}/content"),
                         ("GET", f"/documents/{doc_id}/versions/1/content"),
                         ("POST", f"/documents/{doc_id}/url"),
                         ("GET", f"/documents/{doc_id}/link"),
                         ("DELETE", f"/documents/{doc_id}")):
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 404, (method, path, response.status_code)
    for path in (f"/documents/{doc_id}/content", "/documents/0123456789abcdef/content"):
        replaced = await client.put(path, content=b"x", headers={**headers, "If-Match": '"1"'})
        assert replaced.status_code == 412  # If-Match on an absent document
    listed = await client.get("/documents", headers=headers)
    assert doc_id not in [d["id"] for d in listed.json()["items"]]


async def test_held_over_http(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger:
        settings = ledger.settings.with_(api_tokens=TOKENS)
        async with client_for(ledger, settings) as client:
            created = await client.post("/documents?name=p.png&hold=true", content=PNG,
                                        headers={**WRITER, "Content-Type": "image/png"})
            assert created.status_code == 201, created.text
            doc = created.json()
            assert doc["status"] == "held"
            await not_found_everywhere(client, doc["id"], READER)
            told = await client.get(f"/documents/{doc['id']}", headers=WRITER)
            assert told.status_code == 200
            assert told.json()["status"] == "held"
            assert told.json()["processors"] == {"content-type": "pending"}
            assert told.json()["sha256"] == doc["sha256"] and told.json()["size"] == len(PNG)
            content = await client.get(f"/documents/{doc['id']}/content", headers=WRITER)
            assert content.status_code == 404  # its state, never its bytes

            await ProcessingWorker(ledger).run_once()
            ready = await client.get(f"/documents/{doc['id']}/content", headers=READER)
            assert ready.status_code == 200 and ready.content == PNG

            fake = (await client.post("/documents?name=f.png&hold=true", content=PDF,
                                      headers={**WRITER, "Content-Type": "image/png"})).json()
            await ProcessingWorker(ledger).run_once()
            await not_found_everywhere(client, fake["id"], READER)
            body = problem(await client.get(f"/documents/{fake['id']}", headers=WRITER), 410,
                           "document-rejected")
            assert "application/pdf" in str(body["reason"])
            assert "application/pdf" in str(body["detail"])


async def test_without_tokens_every_caller_is_the_writer(open_ledger: LedgerFactory) -> None:
    async with open_ledger(hold="always") as ledger, client_for(ledger) as client:
        created = await client.post("/documents?name=a.txt", content=b"text",
                                    headers={"Content-Type": "text/plain"})
        assert created.json()["status"] == "held"
        told = await client.get(f"/documents/{created.json()['id']}")
        assert told.status_code == 200 and told.json()["status"] == "held"


def test_settings_refuse_a_scan_without_a_scanner() -> None:
    import pytest

    from blobledger.errors import ConfigError

    with pytest.raises(ConfigError, match="BLOBLEDGER_SCAN_COMMAND"):
        Settings(processors="scan")
    with pytest.raises(ConfigError, match="unknown processor 'virus'"):
        Settings(processors="content-type,virus")
    with pytest.raises(ConfigError, match="must exceed BLOBLEDGER_SCAN_TIMEOUT"):
        Settings(processors="scan", scan_command="true", scan_timeout=700)


async def test_the_python_client_asks_for_a_hold(open_ledger: LedgerFactory) -> None:
    from blobledger.api import create_app
    from blobledger.client import AsyncClient

    async with open_ledger() as ledger:
        client = AsyncClient("http://test", "writer-token")
        await client.http.aclose()  # the same client's requests, to the app in process
        client.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(
                ledger, ledger.settings.with_(api_tokens=TOKENS))),
            base_url="http://test", headers=dict(client.http.headers))
        try:
            held = await client.create("c.png", PNG, content_type="image/png", hold=True)
            ready = await client.create("d.png", PNG, content_type="image/png")
            assert (held.status, ready.status) == ("held", "ready")
            assert (await client.get(held.id)).status == "held"  # to its writer
        finally:
            await client.aclose()
