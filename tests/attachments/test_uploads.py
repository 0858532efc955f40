"""Attachments that the client uploads itself, on every backend: a direct upload
(``POST /uploads`` with ``"attachment": true``) and a tus upload (``attachment`` in its
metadata) stage a blob (A1, then A3 at completion, never C4); the application, mounted beside
``create_app(ledger)``, turns the upload's id into a ``StagedBlob`` (``staged_upload``),
checks its ``target`` and attaches it in its own transaction (A4). Bad input and lying
clients get problem JSON, and nothing they left can be attached."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy.orm import Session, sessionmaker
from tusclient import client as tus_client

from blobledger import InvalidInput, Ledger, NotFound, OffsetMismatch
from blobledger.api.app import create_app
from blobledger.blocking import BlockingLedger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import UploadGone
from blobledger.protocol.models import BlobState
from blobledger.sqlalchemy import StagedBlob, StagedUpload
from blobledger.stores.azure import AzureStore
from blobledger.uploads.resumable import Resumable
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import problem
from tests.api.test_direct import put
from tests.attachments.conftest import Invoice, app_engine
from tests.attachments.test_attach import read, settle, states
from tests.support.server import fresh_database, running_server
from tests.support.services import Azurite

TUS = {"Tus-Resumable": "1.0.0"}
PATCH = {**TUS, "Content-Type": "application/offset+octet-stream"}


class AttachBody(BaseModel):
    upload: str


def application(ledger: Ledger, sessions: sessionmaker[Session]) -> FastAPI:
    """blobledger's service and one route of the application's own: attach an uploaded PDF
    to an invoice, after checking what the client said the upload was for."""
    app = create_app(ledger)

    @app.post("/invoices/{invoice_id}/pdf", status_code=201)
    async def attach_pdf(invoice_id: int, body: AttachBody) -> dict[str, Any]:
        staged = await ledger.staged_upload(body.upload)
        if staged.target != f"invoices/{invoice_id}/pdf":
            raise InvalidInput("the upload was made for another invoice")

        def save() -> None:
            with sessions.begin() as session:
                session.add(Invoice(id=invoice_id, number=f"INV-{invoice_id}", pdf=staged))

        await asyncio.to_thread(save)
        return {"invoice": invoice_id, "pdf": staged.name}

    return app


@pytest.fixture
async def client(ledger: Ledger, sessions: sessionmaker[Session]
                 ) -> AsyncIterator[httpx.AsyncClient]:
    app = application(ledger, sessions)
    app.state.resumable = Resumable(ledger, segment=64 * 1024)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://test") as instance:
        yield instance


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def begin(client: httpx.AsyncClient, data: bytes, **extra: Any) -> dict[str, Any]:
    response = await client.post("/uploads", json={
        "attachment": True, "size": len(data), "content_type": "text/plain", **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def direct(client: httpx.AsyncClient, data: bytes, **extra: Any) -> dict[str, Any]:
    """A whole direct attachment upload; the completion's answer."""
    target = await begin(client, data, **extra)
    assert await put(target, data, client) == 201
    done = await client.post(f"/uploads/{target['id']}/complete")
    assert done.status_code == 201, done.text
    return dict(done.json())


def meta(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" if v else k
                    for k, v in values.items())


async def test_direct_attachment_upload_then_the_application_attaches_it(
        ledger: Ledger, client: httpx.AsyncClient, sessions: sessionmaker[Session]) -> None:
    data = os.urandom(300 * 1024)
    target = await begin(client, data, filename="scan.txt", sha256=sha(data),
                         target="invoices/1/pdf")
    problem(await client.post("/invoices/1/pdf", json={"upload": target["id"]}),
            409, "offset-mismatch")  # not complete yet: nothing to attach
    assert await put(target, data, client) == 201
    done = await client.post(f"/uploads/{target['id']}/complete")
    assert done.status_code == 201, done.text
    staged = done.json()
    assert staged == {"id": target["id"], "blob": staged["blob"], "size": len(data),
                      "sha256": sha(data), "md5": hashlib.md5(data).hexdigest(),
                      "content_type": "text/plain", "filename": "scan.txt",
                      "target": "invoices/1/pdf", "state": "staged"}
    assert "attempt" not in done.text and "token" not in done.text
    again = await client.post(f"/uploads/{target['id']}/complete")  # idempotent
    assert (again.status_code, again.json()) == (201, staged)
    # A3, never C4: no document, the blob staged and tagged committed
    assert (await client.get("/documents")).json()["items"] == []
    assert await states(ledger) == {staged["blob"]: BlobState.PENDING}
    assert await ledger.store.get_tags(staged["blob"]) == {"state": "committed"}
    with pytest.raises(NotFound):
        await ledger.attachment(staged["blob"])  # nobody's yet

    problem(await client.post("/invoices/2/pdf", json={"upload": target["id"]}),
            400, "invalid-input")  # the app checks the target
    attached = await client.post("/invoices/1/pdf", json={"upload": target["id"]})
    assert attached.status_code == 201, attached.text
    assert attached.json() == {"invoice": 1, "pdf": staged["blob"]}
    with sessions() as session:
        pdf = session.get_one(Invoice, 1).pdf
    assert pdf is not None and (pdf.name, pdf.sha256, pdf.filename, pdf.size) == \
        (staged["blob"], sha(data), "scan.txt", len(data))
    assert await read(ledger, pdf) == data
    # once attached, the upload can be attached nowhere else
    problem(await client.post("/invoices/3/pdf", json={"upload": target["id"]}),
            410, "upload-gone")
    problem(await client.post(f"/uploads/{target['id']}/complete"), 410, "upload-gone")
    await settle(ledger)
    report = await check(ledger, settled=True)
    assert report.ok and report.attached == 1, report.render()
    assert await read(ledger, pdf) == data


async def test_tus_attachment_upload_then_the_application_attaches_it(
        ledger: Ledger, client: httpx.AsyncClient, sessions: sessionmaker[Session]) -> None:
    if ledger.store.capabilities.min_part_size > 1:
        pytest.skip("S3's parts must hold 5 MiB: tus on S3 is tests/api/test_tus.py's")
    data = os.urandom(200 * 1024 + 17)
    created = await client.post("/files/", headers={
        **TUS, "Upload-Length": str(len(data)), "Upload-Metadata": meta(
            attachment="", filename="scan.bin", filetype="application/pdf",
            target="invoices/5/pdf", sha256=sha(data))})
    assert created.status_code == 201, created.text
    url = created.headers["Location"].removeprefix("http://test")
    upload_id = url.rsplit("/", 1)[1]
    first = await client.patch(url, content=data[:100 * 1024],
                               headers={**PATCH, "Upload-Offset": "0"})
    assert first.status_code == 204 and "Blobledger-Attachment" not in first.headers
    with pytest.raises(OffsetMismatch):
        await ledger.staged_upload(upload_id)
    last = await client.patch(url, content=data[100 * 1024:],
                              headers={**PATCH, "Upload-Offset": str(100 * 1024)})
    assert last.status_code == 204, last.text
    blob = last.headers["Blobledger-Attachment"]
    assert "Blobledger-Document" not in last.headers and "Location" not in last.headers
    head = await client.head(url, headers=TUS)
    assert head.headers["Blobledger-Attachment"] == blob
    assert head.headers["Upload-Offset"] == str(len(data))
    assert (await client.get("/documents")).json()["items"] == []
    assert await states(ledger) == {blob: BlobState.PENDING}

    staged = await ledger.staged_upload(upload_id)
    assert isinstance(staged, StagedUpload) and isinstance(staged, StagedBlob)
    assert (staged.name, staged.size, staged.sha256, staged.content_type, staged.filename,
            staged.target, staged.upload_id) == (blob, len(data), sha(data),
                                                 "application/pdf", "scan.bin",
                                                 "invoices/5/pdf", upload_id)
    attached = await client.post("/invoices/5/pdf", json={"upload": upload_id})
    assert attached.status_code == 201, attached.text
    assert (await states(ledger))[blob] == BlobState.ATTACHED
    with sessions() as session:
        pdf = session.get_one(Invoice, 5).pdf
    assert pdf is not None and await read(ledger, pdf) == data
    await settle(ledger)
    report = await check(ledger, settled=True)
    assert report.ok and report.attached == 1, report.render()


async def test_creation_with_upload_completes_an_attachment_at_once(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    data = b"small attachment"
    created = await client.post("/files/", content=data, headers={
        **PATCH, "Upload-Length": str(len(data)),
        "Upload-Metadata": meta(attachment="true", name="tiny.txt")})
    assert created.status_code == 201, created.text
    blob = created.headers["Blobledger-Attachment"]
    staged = await ledger.staged_upload(created.headers["Location"].rsplit("/", 1)[1])
    assert (staged.name, staged.filename, staged.target, staged.size) == \
        (blob, "tiny.txt", None, len(data))
    assert await ledger.store.get_tags(blob) == {"state": "committed"}


async def test_bad_attachment_uploads_get_problems(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    base = {"attachment": True, "size": 10}
    problem(await client.post("/uploads", json={**base, "name": "doc.txt"}),
            400, "invalid-input")  # an attachment has no document name
    problem(await client.post("/uploads", json={"size": 10, "filename": "a.txt"}),
            400, "invalid-input")  # a document upload needs its name
    problem(await client.post("/uploads", json={"name": "d.txt", "size": 10, "target": "x"}),
            400, "invalid-input")  # a target is for attachments
    problem(await client.post("/uploads", json={**base, "target": "t" * 257}),
            400, "invalid-input")
    problem(await client.post("/uploads", json={**base, "filename": "a\u202eb"}),
            400, "invalid-input")  # a filename that displays as something else
    problem(await client.post("/files/", headers={
        **TUS, "Upload-Length": "10", "Upload-Metadata": meta(attachment="", target="t" * 257)}),
        400, "invalid-input")
    assert await states(ledger) == {}  # nothing recorded for any of them
    ok = await begin(client, b"0123456789", target="t" * 256)
    assert ok["size"] == 10

    with pytest.raises(UploadGone):
        await ledger.staged_upload("0" * 32)
    with pytest.raises(UploadGone):
        await ledger.staged_upload("no\x00such")
    with pytest.raises(OffsetMismatch):
        await ledger.staged_upload(ok["id"])  # not complete
    document = await client.post("/uploads", json={"name": "doc.txt", "size": 3,
                                                   "content_type": "text/plain"})
    assert document.status_code == 201, document.text
    assert await put(document.json(), b"doc", client) == 201
    assert (await client.post(f"/uploads/{document.json()['id']}/complete")).status_code == 201
    problem(await client.post("/invoices/1/pdf", json={"upload": document.json()["id"]}),
            400, "invalid-input")  # a document's upload is no attachment
    problem(await client.post("/invoices/1/pdf", json={"upload": "0" * 32}),
            410, "upload-gone")


@pytest.mark.parametrize("lie", ["sha256", "size"])
async def test_a_lying_client_is_given_up_and_nothing_can_be_attached(
        ledger: Ledger, client: httpx.AsyncClient, lie: str) -> None:
    data = os.urandom(64 * 1024)
    sent = bytes(reversed(data)) if lie == "sha256" else data[:-1]
    declared = {"sha256": sha(data)} if lie == "sha256" else {}  # else only its size lies
    target = await begin(client, data, target="invoices/1/pdf", **declared)
    if target["via"] == "service" and lie == "sha256":
        # serve checks the declared SHA-256 while it receives: nothing is stored
        problem(await client.put(target["url"].removeprefix("http://test"), content=sent,
                                 headers=target["headers"]), 400, "checksum-mismatch")
        problem(await client.post(f"/uploads/{target['id']}/complete"),
                409, "offset-mismatch")
        assert (await client.delete(f"/uploads/{target['id']}")).status_code == 204
    else:
        assert await put(target, sent, client) == 201
        problem(await client.post(f"/uploads/{target['id']}/complete"),
                400, "checksum-mismatch")
    problem(await client.post("/invoices/1/pdf", json={"upload": target["id"]}),
            410, "upload-gone")
    assert set((await states(ledger)).values()) <= {BlobState.DELETING}
    await settle(ledger)
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


async def test_an_unattached_upload_is_swept_and_its_attach_fails(
        ledger: Ledger, client: httpx.AsyncClient, sessions: sessionmaker[Session]) -> None:
    from blobledger.errors import AttachLost

    done = await direct(client, b"never attached", target="invoices/9/pdf")
    staged = await ledger.staged_upload(done["id"])
    await settle(ledger)  # the application never attached it in time
    assert await states(ledger) == {}
    with pytest.raises(UploadGone):
        await ledger.staged_upload(done["id"])
    with sessions() as session:
        session.add(Invoice(id=9, number="INV-9", pdf=staged))
        with pytest.raises(AttachLost):
            session.commit()
        session.rollback()
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


async def test_an_expired_tus_attachment_upload_is_swept_with_its_parts(
        ledger: Ledger, client: httpx.AsyncClient) -> None:
    if ledger.store.capabilities.min_part_size > 1:
        pytest.skip("S3's parts must hold 5 MiB")
    created = await client.post("/files/", headers={
        **TUS, "Upload-Length": str(300 * 1024), "Upload-Metadata": meta(attachment="")})
    url = created.headers["Location"].removeprefix("http://test")
    part = await client.patch(url, content=os.urandom(128 * 1024),
                              headers={**PATCH, "Upload-Offset": "0"})
    assert part.status_code == 204 and part.headers["Upload-Offset"] == str(128 * 1024)
    assert [u async for u in ledger.store.list_uncommitted()] != []
    ledger.clock_offset = ledger.settings.resumable_expiry + ledger.settings.sweep_after
    await Sweeper(ledger).run_once()  # fenced, its parts dropped
    ledger.clock_offset += ledger.settings.delete_grace + 1
    await Sweeper(ledger).run_once()  # the deletion path
    assert await states(ledger) == {}
    assert (await client.head(url, headers=TUS)).status_code == 410  # its row went too
    assert [u async for u in ledger.store.list_uncommitted()] == []
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


@pytest.mark.parametrize("backend", ["sqlite-local"])
async def test_a_synchronous_application_attaches_an_upload(
        ledger: Ledger, client: httpx.AsyncClient, sessions: sessionmaker[Session]) -> None:
    done = await direct(client, b"sync app", filename="s.txt", target="invoices/4/pdf")

    def app() -> str | None:
        with BlockingLedger.from_urls(ledger.db.url, ledger.store.url) as blocking:
            staged = blocking.staged_upload(done["id"])
            with sessions.begin() as session:
                session.add(Invoice(id=4, number="INV-4", pdf=staged))
            with pytest.raises(UploadGone):
                blocking.staged_upload(done["id"])  # attached: not again
            return staged.target

    assert await asyncio.to_thread(app) == "invoices/4/pdf"
    assert (await states(ledger))[done["blob"]] == BlobState.ATTACHED


def test_tuspy_uploads_an_attachment_that_a_synchronous_app_attaches(azurite: Azurite) -> None:
    """tuspy against a real ``serve`` (PostgreSQL, Azurite), in parts with checksums; the
    application, another process with its own blocking ledger, attaches it."""
    data = os.urandom(3 * 1024 * 1024 + 5)
    with fresh_database() as url, running_server(azurite, url) as server:
        uploader = tus_client.TusClient(f"{server.url}/files/").uploader(
            file_stream=io.BytesIO(data), chunk_size=1024 * 1024, upload_checksum=True,
            metadata={"attachment": "true", "filename": "scan.pdf",
                      "filetype": "application/pdf", "target": "invoices/8/pdf"})
        uploader.upload()
        head = httpx.head(str(uploader.url), headers=TUS)
        blob = head.headers["Blobledger-Attachment"]
        assert httpx.get(f"{server.url}/documents").json()["items"] == []
        store = AzureStore(server.container,
                           connection_string=server.env["BLOBLEDGER_AZURE_CONNECTION_STRING"])
        engine = app_engine(url)
        with BlockingLedger(Ledger(Database(url), store, Settings(
                database_url=url, store_url=store.url))) as ledger:
            staged = ledger.staged_upload(str(uploader.url).rsplit("/", 1)[1])
            assert (staged.name, staged.target, staged.filename, staged.sha256) == \
                (blob, "invoices/8/pdf", "scan.pdf", sha(data))
            with Session(engine) as session, session.begin():
                session.add(Invoice(id=8, number="INV-8", pdf=staged))
            with Session(engine) as session:
                pdf = session.get_one(Invoice, 8).pdf
            assert pdf is not None
            assert b"".join(ledger.read_attachment(pdf)) == data
        engine.dispose()


async def test_each_completed_attachment_upload_answers_its_own_blob(ledger: Ledger) -> None:
    """Two attachment uploads completed side by side: each one's staged blob is its own."""
    resumable = Resumable(ledger)
    uploads = []
    for data in (b"first attachment", b"second attachment"):
        upload = await resumable.create(len(data), {"attachment": "1", "filename": "a.bin"})

        async def body(data: bytes = data) -> AsyncIterator[bytes]:
            yield data

        assert await resumable.append(upload, 0, body()) == len(data)
        await resumable.complete(await resumable.find(upload.id))
        uploads.append((upload, data))
    for upload, data in uploads:
        staged = await ledger.staged_upload(upload.id)
        assert (staged.name, staged.size) == (upload.blob_name, len(data))
