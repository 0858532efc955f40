"""tus 1.0 at ``/files/`` in-process, on every backend: creation, parts, completion (C3/C4),
checksums, termination, expiry, and the statuses for bad input."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.protocol.models import UploadRow
from blobledger.stores.s3.store import MIN_PART_SIZE
from blobledger.uploads.resumable import Resumable
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import client_for, leftovers, problem
from tests.conftest import EACH_DATABASE, ONE_BACKEND
from tests.support.holds import Holds

TUS = {"Tus-Resumable": "1.0.0"}
PATCH = {**TUS, "Content-Type": "application/offset+octet-stream"}


def meta(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


def sizes(ledger: Ledger) -> tuple[int, int]:
    """(segment, request chunk) for the backend: S3 parts must hold 5 MiB."""
    if ledger.store.capabilities.min_part_size > 1:
        return MIN_PART_SIZE, MIN_PART_SIZE + 1024 * 1024
    return 64 * 1024, 100 * 1024


@pytest.fixture
async def tus(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(ledger) as client:
        app = client._transport.app  # type: ignore[attr-defined]
        app.state.resumable = Resumable(ledger, segment=sizes(ledger)[0])
        yield client


async def create(client: httpx.AsyncClient, length: int, **values: str) -> str:
    response = await client.post("/files/", headers={
        **TUS, "Upload-Length": str(length), "Upload-Metadata": meta(**values)})
    assert response.status_code == 201, response.text
    assert response.headers["Upload-Expires"].endswith("GMT")
    return str(response.headers["Location"]).removeprefix("http://test")


async def head(client: httpx.AsyncClient, url: str) -> httpx.Response:
    return await client.head(url, headers=TUS)


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_options_lists_the_extensions(tus: httpx.AsyncClient) -> None:
    response = await tus.options("/files/")
    assert response.status_code == 204
    assert response.headers["Tus-Version"] == "1.0.0"
    assert set(response.headers["Tus-Extension"].split(",")) == {
        "creation", "creation-with-upload", "checksum", "termination", "expiration"}
    assert "sha256" in response.headers["Tus-Checksum-Algorithm"]


async def test_upload_in_parts_becomes_a_document(ledger: Ledger, tus: httpx.AsyncClient) -> None:
    _, chunk = sizes(ledger)
    data = os.urandom(chunk * 2 + 12345)
    url = await create(tus, len(data), filename="report.bin", filetype="application/x-test")
    assert (await head(tus, url)).headers["Upload-Offset"] == "0"
    offset = 0
    while offset < len(data):
        body = data[offset:offset + chunk]
        response = await tus.patch(url, content=body,
                                   headers={**PATCH, "Upload-Offset": str(offset)})
        assert response.status_code == 204, response.text
        new = int(response.headers["Upload-Offset"])
        assert offset < new <= offset + len(body)
        offset = new
        assert (await tus.get("/documents")).json()["items"] == [] or offset == len(data)
    doc_id = response.headers["Blobledger-Document"]
    doc = (await tus.get(f"/documents/{doc_id}")).json()
    assert doc["name"] == "report.bin" and doc["size"] == len(data)
    assert doc["content_type"] == "application/x-test"
    assert doc["sha256"] == hashlib.sha256(data).hexdigest()
    assert (await tus.get(f"/documents/{doc_id}/content")).content == data
    info = await ledger.store.stat(doc["blob"])
    assert info.sha256 == doc["sha256"]
    assert await ledger.store.get_tags(doc["blob"]) == {"state": "committed"}
    # HEAD says where the document is; a PATCH never writes to a completed upload
    done = await head(tus, url)
    assert done.headers["Blobledger-Document"] == doc_id
    again = await tus.patch(url, content=b"x" * 10,
                            headers={**PATCH, "Upload-Offset": str(len(data))})
    problem(again, 409, "offset-mismatch")
    again = await tus.patch(url, content=b"x" * 10, headers={**PATCH, "Upload-Offset": "0"})
    problem(again, 409, "offset-mismatch")
    assert (await tus.get(f"/documents/{doc_id}/content")).content == data
    assert [u async for u in ledger.store.list_uncommitted()] == []


async def test_creation_with_upload(tus: httpx.AsyncClient) -> None:
    data = b"small file"
    response = await tus.post("/files/", content=data, headers={
        **PATCH, "Upload-Length": str(len(data)), "Upload-Metadata": meta(name="s.txt")})
    assert response.status_code == 201, response.text
    assert response.headers["Upload-Offset"] == str(len(data))
    doc_id = response.headers["Blobledger-Document"]
    assert (await tus.get(f"/documents/{doc_id}/content")).content == data


async def test_wrong_offset_is_409_and_past_the_length_413(tus: httpx.AsyncClient) -> None:
    url = await create(tus, 100, name="a.txt")
    problem(await tus.patch(url, content=b"x", headers={**PATCH, "Upload-Offset": "5"}),
            409, "offset-mismatch")
    problem(await tus.patch(url, content=b"x" * 101, headers={**PATCH, "Upload-Offset": "0"}),
            413)
    assert (await head(tus, url)).headers["Upload-Offset"] == "0"


async def test_checksum_mismatch_is_460_and_records_nothing(tus: httpx.AsyncClient) -> None:
    url = await create(tus, 20, name="c.txt")
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    response = await tus.patch(url, content=b"0123456789", headers={
        **PATCH, "Upload-Offset": "0", "Upload-Checksum": f"sha256 {wrong}"})
    problem(response, 460, "checksum-mismatch")
    assert (await head(tus, url)).headers["Upload-Offset"] == "0"
    right = base64.b64encode(hashlib.sha1(b"0123456789" * 2).digest()).decode()
    response = await tus.patch(url, content=b"0123456789" * 2, headers={
        **PATCH, "Upload-Offset": "0", "Upload-Checksum": f"sha1 {right}"})
    assert response.status_code == 204, response.text
    assert "Blobledger-Document" in response.headers


async def test_declared_sha256_that_lies_abandons_the_upload(
        ledger: Ledger, tus: httpx.AsyncClient) -> None:
    data = b"the real bytes"
    url = await create(tus, len(data), name="lie.txt", sha256="0" * 64)
    response = await tus.patch(url, content=data, headers={**PATCH, "Upload-Offset": "0"})
    problem(response, 400, "checksum-mismatch")
    assert (await head(tus, url)).status_code == 410
    left = await leftovers(ledger)
    assert left["documents"] == [] and set(left["blobs"]) <= {"deleting"}
    assert set(left["stored"]) <= {"pending"}


async def test_a_lying_upload_given_up_leaves_another_open_upload_alone(
        ledger: Ledger, tus: httpx.AsyncClient) -> None:
    """Another upload is open, nothing verified yet, while one whose declared SHA-256 lies
    is given up: only the liar's upload goes (the give-up removes its own unverified upload
    row, no other), and the other still completes to its document."""
    other = b"the bytes of the upload left open"
    kept = await create(tus, len(other), name="kept.txt")
    data = b"the real bytes"
    url = await create(tus, len(data), name="lie.txt", sha256="0" * 64)
    problem(await tus.patch(url, content=data, headers={**PATCH, "Upload-Offset": "0"}),
            400, "checksum-mismatch")
    assert (await head(tus, url)).status_code == 410
    assert (await head(tus, kept)).headers["Upload-Offset"] == "0"
    response = await tus.patch(kept, content=other, headers={**PATCH, "Upload-Offset": "0"})
    assert response.status_code == 204, response.text
    doc_id = response.headers["Blobledger-Document"]
    assert (await tus.get(f"/documents/{doc_id}/content")).content == other
    assert [d["name"] for d in (await tus.get("/documents")).json()["items"]] == ["kept.txt"]


async def test_terminate_drops_intent_and_parts(ledger: Ledger, tus: httpx.AsyncClient) -> None:
    _, chunk = sizes(ledger)
    url = await create(tus, chunk * 3, name="t.bin")
    response = await tus.patch(url, content=os.urandom(chunk),
                               headers={**PATCH, "Upload-Offset": "0"})
    assert int(response.headers["Upload-Offset"]) > 0
    assert (await tus.delete(url, headers=TUS)).status_code == 204
    assert (await head(tus, url)).status_code == 410
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
    assert [u async for u in ledger.store.list_uncommitted()] == []


async def test_a_termination_the_completion_finished_first_is_204_and_deletes_nothing(
        ledger: Ledger, tus: httpx.AsyncClient, holds: Holds) -> None:
    """A DELETE that read the upload open is held before it terminates it; the last PATCH
    completes it meanwhile: the DELETE answers 204 as for any finished upload (not 503
    with a retry), and the document stays."""
    _, chunk = sizes(ledger)
    url = await create(tus, chunk, name="finished.bin")
    holds.at("upload.before_terminate")
    deleting = asyncio.create_task(tus.delete(url, headers=TUS))
    await holds.wait("upload.before_terminate")
    data = os.urandom(chunk)
    last = await tus.patch(url, content=data, headers={**PATCH, "Upload-Offset": "0"})
    assert last.status_code == 204, last.text
    holds.go("upload.before_terminate")
    deleted = await deleting
    assert deleted.status_code == 204, deleted.text
    doc_id = last.headers["Blobledger-Document"]
    assert (await tus.get(f"/documents/{doc_id}/content")).content == data


async def test_terminated_while_its_completion_publishes(
        ledger: Ledger, tus: httpx.AsyncClient, holds: Holds) -> None:
    """The last PATCH's completion held just before the store publishes the parts; the
    upload terminated meanwhile (its parts dropped): the completion answers 410, not a
    storage failure, and nothing is left."""
    _, chunk = sizes(ledger)
    url = await create(tus, chunk, name="raced.bin")
    holds.at("staged.before_commit")
    last = asyncio.create_task(tus.patch(url, content=os.urandom(chunk),
                                         headers={**PATCH, "Upload-Offset": "0"}))
    await holds.wait("staged.before_commit")
    assert (await tus.delete(url, headers=TUS)).status_code == 204
    holds.go("staged.before_commit")
    problem(await last, 410, "upload-gone")
    assert (await head(tus, url)).status_code == 410
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
    assert [u async for u in ledger.store.list_uncommitted()] == []


@pytest.mark.parametrize("backend", EACH_DATABASE, indirect=True)
async def test_bad_requests(tus: httpx.AsyncClient) -> None:
    problem(await tus.post("/files/", headers={"Upload-Length": "1"}), 412, "tus-version")
    problem(await tus.post("/files/", headers={**TUS, "Upload-Length": "1"}), 400)
    problem(await tus.post("/files/", headers={**TUS, "Upload-Length": "x",
                                               "Upload-Metadata": meta(name="a")}), 400)
    problem(await tus.post("/files/", headers={**TUS, "Upload-Length": str(10**13),
                                               "Upload-Metadata": meta(name="a")}), 413)
    problem(await tus.post("/files/", headers={**TUS, "Upload-Length": "1",
                                               "Upload-Metadata": "name !!"}), 400)
    url = await create(tus, 10, name="b.txt")
    problem(await tus.patch(url, content=b"x", headers={**TUS, "Upload-Offset": "0"}), 415)
    assert (await tus.head("/files/" + "0" * 32, headers=TUS)).status_code == 410
    taken = await create(tus, 1, name="dup.txt")
    assert taken
    problem(await tus.post("/files/", headers={**TUS, "Upload-Length": "1",
                                               "Upload-Metadata": meta(name="dup.txt")}),
            409, "name-taken")


async def test_expired_upload_is_gone_and_swept(ledger: Ledger, tus: httpx.AsyncClient) -> None:
    _, chunk = sizes(ledger)
    url = await create(tus, chunk * 3, name="old.bin")
    await tus.patch(url, content=os.urandom(chunk), headers={**PATCH, "Upload-Offset": "0"})
    ledger.transitions.offset = ledger.settings.resumable_expiry + 1
    try:
        assert (await head(tus, url)).status_code == 410
        problem(await tus.patch(url, content=b"x", headers={**PATCH, "Upload-Offset": "0"}),
                410, "upload-gone")
        report = await Sweeper(ledger).run_once()
        assert report.swept == 1
    finally:
        ledger.transitions.offset = 0
    assert await leftovers(ledger) == {"documents": [], "blobs": [], "stored": []}
    assert [u async for u in ledger.store.list_uncommitted()] == []
    async with ledger.db.session() as session:
        assert (await session.execute(select(UploadRow))).all() == []


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_tokens_apply(ledger: Ledger) -> None:
    from blobledger.config import Settings

    settings = Settings(database_url="sqlite://", store_url=ledger.store.url,
                        api_tokens={"r": frozenset({"read"}), "w": frozenset({"write"})})
    async with client_for(ledger, settings) as client:
        headers = {**TUS, "Upload-Length": "1", "Upload-Metadata": meta(name="tok")}
        problem(await client.post("/files/", headers=headers), 401)
        problem(await client.post("/files/", headers={**headers, "Authorization": "Bearer r"}),
                403)
        ok = await client.post("/files/", headers={**headers, "Authorization": "Bearer w"})
        assert ok.status_code == 201


async def test_reconciler_reports_abandoned_parts_only(
        ledger: Ledger, tus: httpx.AsyncClient) -> None:
    from blobledger.workers.reconciler import reconcile

    _, chunk = sizes(ledger)
    url = await create(tus, chunk * 3, name="parts.bin")
    await tus.patch(url, content=os.urandom(chunk), headers={**PATCH, "Upload-Offset": "0"})
    later = ledger.settings.sweep_after + 60  # past the upload deadline, before expiry
    ledger.transitions.offset = later
    try:
        live = await reconcile(ledger, fix=False, older_than=ledger.settings.sweep_after)
        assert live.total == 0, live.as_dict()
        expired = ledger.settings.resumable_expiry + 60
        ledger.transitions.offset = expired
        report = await reconcile(ledger, fix=False, older_than=ledger.settings.sweep_after)
        assert report.uncommitted == 1, report.as_dict()
        assert (await Sweeper(ledger).run_once()).swept == 1
        assert [u async for u in ledger.store.list_uncommitted()] == []
    finally:
        ledger.transitions.offset = 0


async def test_an_empty_upload_completes_at_creation(
        ledger: Ledger, tus: httpx.AsyncClient) -> None:
    """An empty file: tus clients (tuspy, tus-js-client) send no PATCH for it, so the
    creation itself completes it (on S3 with no multipart part: a create-only PutObject).
    HEAD answers the document; it reads back empty."""
    created = await tus.post("/files/", headers={
        **TUS, "Upload-Length": "0", "Upload-Metadata": meta(name="empty.txt")})
    assert created.status_code == 201, created.text
    doc_id = created.headers["Blobledger-Document"]
    url = str(created.headers["Location"]).removeprefix("http://test")
    done = await head(tus, url)
    assert done.status_code == 200 and done.headers["Blobledger-Document"] == doc_id
    doc = (await tus.get(f"/documents/{doc_id}")).json()
    assert doc["size"] == 0 and doc["sha256"] == hashlib.sha256(b"").hexdigest()
    content = await tus.get(f"/documents/{doc_id}/content")
    assert content.status_code == 200 and content.content == b""
    assert await ledger.store.get_tags(doc["blob"]) == {"state": "committed"}
    assert [u async for u in ledger.store.list_uncommitted()] == []
    with_body = await tus.post("/files/", content=b"", headers={
        **PATCH, "Upload-Length": "0", "Upload-Metadata": meta(name="empty-too.txt")})
    assert with_body.status_code == 201, with_body.text
    assert with_body.headers["Upload-Offset"] == "0"
    again = with_body.headers["Blobledger-Document"]
    assert (await tus.get(f"/documents/{again}/content")).content == b""
