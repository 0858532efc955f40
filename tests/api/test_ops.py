"""``/ops/...`` (what the page's operations view reads) and the page's own files at ``/``."""

from __future__ import annotations

import pytest

from blobledger import Ledger
from blobledger.api.routes.ops import SERIES
from tests.api.conftest import client_for, problem
from tests.conftest import ONE_BACKEND

READER = {"Authorization": "Bearer reader-token"}
WRITER = {"Authorization": "Bearer writer-token"}


def _tokens(ledger: Ledger) -> Ledger:
    settings = ledger.settings.with_(api_tokens={
        "reader-token": frozenset({"read"}), "writer-token": frozenset({"read", "write"})})
    return Ledger(ledger.db, ledger.store, settings)  # shares (and leaves open) db and store


async def test_ops_views_scopes_and_problems(ledger: Ledger) -> None:
    gated = _tokens(ledger)
    stuck = await ledger.begin_create("ops/stuck.bin", "application/octet-stream")
    gone = await ledger.create("ops/gone.txt", b"bye")
    await ledger.delete(gone.id)
    async with client_for(gated, gated.settings) as client:
        problem(await client.get("/ops/whoami"), 401, "unauthorized")
        problem(await client.get("/ops/overview",
                                 headers={"Authorization": "Bearer nope"}), 401, "unauthorized")
        assert (await client.get("/ops/whoami", headers=READER)).json() == {
            "tokens": True, "scopes": ["read"]}
        assert (await client.get("/ops/whoami", headers=WRITER)).json() == {
            "tokens": True, "scopes": ["read", "write"]}

        overview = (await client.get("/ops/overview", headers=READER)).json()
        assert overview["pending"]["count"] == 1
        assert overview["pending"]["by_age"][0] == {"age": "< 1 min", "count": 1}
        [oldest] = overview["pending"]["oldest"]  # a reader sees no name GET /documents hides
        assert (oldest["blob"], oldest["document_name"], oldest["document_id"]) \
            == (None, None, None) and oldest["kind"] == "create"
        assert overview["deleting"]["count"] == 1
        assert overview["deleting"]["oldest"][0]["document_id"] is None
        queue = overview["event_queue"]  # gone's document.ready and document.deleted
        assert (queue["pending"], queue["delivered"], queue["dead"]) == (2, 0, 0)
        assert queue["lag_seconds"] >= 0
        overview = (await client.get("/ops/overview", headers=WRITER)).json()
        [oldest] = overview["pending"]["oldest"]
        assert oldest["document_name"] == "ops/stuck.bin"
        assert oldest["document_id"] == stuck.document_id and oldest["kind"] == "create"
        assert overview["deleting"]["oldest"][0]["document_id"] == gone.id
        problem(await client.get("/ops/overview", params={"limit": 0}, headers=READER), 400,
                "invalid-input")

        checked = (await client.post("/ops/check", headers=READER)).json()
        assert checked["ok"] is True and checked["pending_documents"] == 1
        reconciled = await client.post("/ops/reconcile", headers=READER)
        assert reconciled.status_code == 200 and reconciled.json()["rows"] >= 2
        latest = (await client.get("/ops/overview", headers=READER)).json()["reconcile"]
        assert latest is not None and latest["rows"] == reconciled.json()["rows"]

        # the doctor writes probe blobs: a read token may not run it
        problem(await client.post("/ops/doctor", headers=READER), 403, "forbidden")
        if ledger.store.url.startswith("file://"):
            doctor = (await client.post("/ops/doctor", headers=WRITER)).json()
            assert doctor["ok"] is True and len(doctor["checks"]) >= 4

        history = (await client.get("/ops/metrics", headers=READER)).json()
        assert history["series"] == list(SERIES)
        assert set(history["points"][-1]) == {"t", *SERIES}


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_the_page_and_its_files(ledger: Ledger) -> None:
    gated = _tokens(ledger)
    async with client_for(gated, gated.settings) as client:
        page = await client.get("/")  # the page itself needs no token; its data does
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "connect-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert "<script>" not in page.text and " style=" not in page.text
        script = await client.get("/static/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert "innerHTML" not in script.text
        assert (await client.get("/static/vendor/tus-js-client/tus.min.js")).status_code == 200
        for path in ("/static/nope.js", "/static/../api/app.py",
                     "/static/%2e%2e/%2e%2e/api/app.py", "/static/vendor/tus-js-client/VERSION"):
            problem(await client.get(path), 404)


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_without_tokens_everything_is_open(ledger: Ledger) -> None:
    async with client_for(ledger) as client:
        assert (await client.get("/ops/whoami")).json() == {
            "tokens": False, "scopes": ["admin", "read", "write"]}
        assert (await client.get("/ops/overview")).json()["pending"]["count"] == 0
