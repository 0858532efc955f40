"""The upload paths against a hostile or careless client: tus (``/files/``) and direct
uploads (``/uploads``), in process on SQLite and PostgreSQL, over real sockets against
``blobledger serve``, and on Azurite and moto where the store takes the bytes itself.

Each case: a read token changes nothing; ``/ops`` names nothing ``GET /documents`` hides;
``Location`` names the upload and a termination never deletes a document; two PATCHes at
one offset have one winner and one 409 with the true offset; no token in the access log;
a malformed tus header is a 400; a direct upload's size is bound where the store can bind
it, and otherwise refused at completion and swept."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.uploads.resumable import Resumable
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import client_for, leftovers, problem
from tests.conftest import make_store
from tests.hostile.support import connect, read_response, serve

TUS = {"Tus-Resumable": "1.0.0"}
PATCH = {**TUS, "Content-Type": "application/offset+octet-stream"}
READ = {"Authorization": "Bearer ro"}


def raw(headers: dict[str, str | bytes]) -> list[tuple[bytes, bytes]]:
    """Headers as the bytes a client sends (one byte per character of a ``str``)."""
    return [(k.encode(), v if isinstance(v, bytes) else v.encode("latin-1"))
            for k, v in headers.items()]


def meta(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


async def create(client: httpx.AsyncClient, length: int, name: str) -> str:
    response = await client.post("/files/", headers={
        **TUS, "Upload-Length": str(length), "Upload-Metadata": meta(name=name)})
    assert response.status_code == 201, response.text
    return urlsplit(response.headers["Location"]).path


# -- read tokens ----------------------------------------------------------------------------

async def test_a_head_with_a_read_token_never_completes_an_upload(
        hostile_ledger: Ledger, hostile: httpx.AsyncClient) -> None:
    """Every byte stored, the completion not run (as after a last PATCH that failed): a
    read token's HEAD is told the offset and changes nothing; a writer's HEAD completes."""
    data = b"interrupted upload"
    url = await create(hostile, len(data), "interrupted.txt")
    upload_id = url.rsplit("/", 1)[1]
    resumable = Resumable(hostile_ledger)

    async def body() -> AsyncIterator[bytes]:
        yield data

    upload = await resumable.find(upload_id)
    assert await resumable.append(upload, 0, body()) == len(data)  # stored, not completed
    head = await hostile.head(url, headers={**TUS, **READ})
    assert head.status_code == 200 and head.headers["Upload-Offset"] == str(len(data))
    assert "Blobledger-Document" not in head.headers
    assert (await resumable.find(upload_id)).state == "open"
    assert (await hostile.get("/documents", headers=READ)).json()["items"] == []
    assert (await leftovers(hostile_ledger))["documents"] == ["pending"]
    # the writer's client comes back: its HEAD completes the upload
    done = await hostile.head(url, headers=TUS)
    doc_id = done.headers["Blobledger-Document"]
    assert (await hostile.get(f"/documents/{doc_id}/content")).content == data


async def test_ops_overview_names_to_a_read_token_only_what_documents_shows(
        hostile: httpx.AsyncClient) -> None:
    await create(hostile, 10, "secret-merger-plan.txt")  # pending: GET /documents hides it
    listed = await hostile.get("/documents", headers=READ)
    assert "secret-merger-plan" not in listed.text
    seen = await hostile.get("/ops/overview", headers=READ)
    assert seen.status_code == 200, seen.text
    assert "secret-merger-plan" not in seen.text, seen.text
    pending = seen.json()["pending"]
    assert pending["count"] == 1
    assert [(r["blob"], r["document_id"], r["document_name"]) for r in pending["oldest"]] \
        == [(None, None, None)]
    writer = (await hostile.get("/ops/overview")).json()  # a writer sees the names
    assert writer["pending"]["oldest"][0]["document_name"] == "secret-merger-plan.txt"


# -- Location and termination ---------------------------------------------------------------

async def test_location_names_the_upload_and_termination_never_deletes_the_document(
        hostile: httpx.AsyncClient) -> None:
    data = b"finished in one request"
    made = await hostile.post("/files/", content=data, headers={
        **PATCH, "Upload-Length": str(len(data)), "Upload-Metadata": meta(name="whole.txt")})
    assert made.status_code == 201, made.text
    doc_id = made.headers["Blobledger-Document"]
    url = urlsplit(made.headers["Location"]).path
    assert url.startswith("/files/") and doc_id not in url
    head = await hostile.head(url, headers=TUS)
    assert head.headers["Blobledger-Document"] == doc_id
    assert urlsplit(head.headers.get("Location", url)).path == url, head.headers
    # a tus client terminating its upload URL (tus-js-client's abort(true))
    ended = await hostile.delete(url, headers=TUS)
    assert ended.status_code == 204, ended.text
    assert (await hostile.get(f"/documents/{doc_id}/content")).content == data
    # a PATCH that finishes an upload answers no document Location either
    url = await create(hostile, 3, "patched.txt")
    last = await hostile.patch(url, content=b"abc", headers={**PATCH, "Upload-Offset": "0"})
    assert last.status_code == 204 and "Blobledger-Document" in last.headers
    assert urlsplit(last.headers.get("Location", url)).path == url, last.headers
    # terminating an open upload still drops it
    url = await create(hostile, 3, "dropped.txt")
    assert (await hostile.delete(url, headers=TUS)).status_code == 204
    assert (await hostile.head(url, headers=TUS)).status_code in (404, 410)


# -- concurrent PATCHes ---------------------------------------------------------------------

@pytest.mark.parametrize("instances", [1, 2], ids=["one-instance", "two-instances"])
async def test_two_patches_at_one_offset_have_one_winner(
        hostile_ledger: Ledger, instances: int) -> None:
    """A slow PATCH at offset 0 is overtaken by a fast one at offset 0, with other bytes,
    in the same process or through another instance: one answers 204 and its bytes are
    the document; the other 409 with the offset the upload is really at, and no document."""
    length = 10
    slow_started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"S" * 5
        slow_started.set()
        await release.wait()
        yield b"S" * 5

    clients = [client_for(hostile_ledger) for _ in range(instances)]
    try:
        for client in clients:
            client.headers["Authorization"] = "Bearer rw"
        first, second = clients[0], clients[-1]
        url = await create(first, length, "raced.txt")
        headers = {**PATCH, "Upload-Offset": "0", "Content-Length": str(length)}
        slow_patch = asyncio.create_task(first.patch(url, content=slow(), headers=headers))
        await asyncio.wait_for(slow_started.wait(), 10)
        fast_patch = asyncio.create_task(second.patch(url, content=b"F" * length,
                                                      headers=headers))
        await asyncio.sleep(0.5)  # the fast one has either finished or is waiting its turn
        release.set()
        answers = await asyncio.wait_for(asyncio.gather(slow_patch, fast_patch), 20)
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [204, 409], [(a.status_code, a.text) for a in answers]
        won = next(a for a in answers if a.status_code == 204)
        lost = next(a for a in answers if a.status_code == 409)
        assert lost.headers["Upload-Offset"] == str(length), lost.headers
        assert "Blobledger-Document" not in lost.headers
        sent = b"S" * length if won is answers[0] else b"F" * length
        content = await first.get(f"/documents/{won.headers['Blobledger-Document']}/content")
        assert content.content == sent
    finally:
        for client in clients:
            await client.aclose()


# -- malformed tus headers ------------------------------------------------------------------

@pytest.mark.parametrize("value", ["9" * 5000, "\u00b2", "1\u00b3", "\u00b9\u00b2",
                                   "12345678901234567890"],
                         ids=["5000-digits", "superscript", "digit-superscript",
                              "superscripts", "20-digits"])
async def test_a_malformed_upload_length_or_offset_is_a_400(
        hostile: httpx.AsyncClient, value: str) -> None:
    made = await hostile.post("/files/", headers=raw({
        **TUS, "Upload-Length": value, "Upload-Metadata": meta(name="n.txt")}))
    problem(made, 400, "invalid-input")
    url = await create(hostile, 3, "offset.txt")
    patched = await hostile.patch(url, content=b"abc",
                                  headers=raw({**PATCH, "Upload-Offset": value}))
    problem(patched, 400, "invalid-input")


async def test_non_ascii_metadata_or_checksum_is_a_400(hostile: httpx.AsyncClient) -> None:
    for value in (b"name \xff", b"n\xe9me YQ==", "name " + "\u00e9"):
        made = await hostile.post("/files/", headers=raw({
            **TUS, "Upload-Length": "3",
            "Upload-Metadata": value if isinstance(value, bytes) else value.encode()}))
        problem(made, 400, "invalid-metadata")
    url = await create(hostile, 3, "checked.txt")
    for checksum in (b"sha256 \xff\xfe", b"sha256 YWJj\xe9", "sha\u00b2 YWJj".encode()):
        patched = await hostile.patch(url, content=b"abc", headers=raw({
            **PATCH, "Upload-Offset": "0", "Upload-Checksum": checksum}))
        assert patched.status_code == 400, patched.text
        problem(patched, 400)
    made = await hostile.post("/files/", content=b"abc", headers=raw({
        **PATCH, "Upload-Length": "3", "Upload-Metadata": meta(name="c.txt"),
        "Upload-Checksum": b"md5 \xff"}))
    problem(made, 400)


async def test_a_nul_in_a_static_path_is_not_a_500(hostile: httpx.AsyncClient) -> None:
    for path in ("/static/%00", "/static/app.js%00.png", "/static/a%00b/app.js"):
        response = await hostile.get(path)
        assert response.status_code == 404, (path, response.status_code, response.text)


# -- serve: the direct upload's own URL -----------------------------------------------------

def test_serve_refuses_bytes_past_the_declared_size_and_logs_no_token() -> None:
    """Against ``serve`` (local disk: the URL is serve's own): a PUT whose Content-Length
    passes the declared size is a 413 before any body byte is read; a chunked one is cut
    at the declared size; the access log shows the URL's token as ``REDACTED``."""
    with serve() as server:
        began = httpx.post(f"{server.url}/uploads", json={
            "name": "thirteen.txt", "size": 13, "content_type": "text/plain"})
        assert began.status_code == 201, began.text
        target = began.json()
        assert target["via"] == "service"
        token = parse_qs(urlsplit(target["url"]).query)["token"][0]
        path = urlsplit(target["url"]).path + "?" + urlsplit(target["url"]).query

        sock = connect(server.port, timeout=10)
        started = time.monotonic()
        try:
            sock.sendall(f"PUT {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Content-Type: text/plain\r\nContent-Length: {24 << 20}\r\n\r\n"
                         .encode())
            answer = read_response(sock)  # not one body byte sent
        finally:
            sock.close()
        assert answer.status == 413, answer
        assert time.monotonic() - started < 5
        assert answer.problem()["type"] == "urn:blobledger:problem:upload-too-large"

        def chunks() -> Any:
            for _ in range(4):
                yield b"x" * 65536

        cut = httpx.put(target["url"], content=chunks(), headers={"Content-Type": "text/plain"})
        assert cut.status_code == 413, cut.text
        fitting = httpx.put(target["url"], content=b"thirteen byte",
                            headers={"Content-Type": "text/plain"})
        assert fitting.status_code == 201, fitting.text
        done = httpx.post(f"{server.url}/uploads/{target['id']}/complete")
        assert done.status_code == 201 and done.json()["size"] == 13, done.text
        time.sleep(0.2)
        log = server.log_text()
        assert f"/uploads/{target['id']}/content?token=REDACTED" in log, log[-2000:]
        assert token not in log


# -- the store's own URL: Azurite and moto --------------------------------------------------

@pytest.fixture(params=["azure", "s3"])
async def store_ledger(request: pytest.FixtureRequest, tmp_path: Path
                       ) -> AsyncIterator[Ledger]:
    kind = str(request.param)
    store = await make_store(
        kind, tmp_path, request.getfixturevalue("azurite") if kind == "azure" else None,
        moto=request.getfixturevalue("moto") if kind == "s3" else None)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger


async def test_a_direct_upload_is_bound_to_its_size_where_the_store_can_bind_it(
        store_ledger: Ledger) -> None:
    """S3: the presigned PUT signs ``Content-Length`` (real S3 refuses any other length;
    moto checks no signature). Azure: a SAS cannot bind the size. Either way, a client that
    parks more bytes than it declared gets a refused completion, and the sweeper removes
    the blob: the bytes live at most until the URL expires and the sweeper passes."""
    async with client_for(store_ledger) as client:
        began = await client.post("/uploads", json={"name": "declared.txt", "size": 13,
                                                    "content_type": "text/plain"})
        assert began.status_code == 201, began.text
        target = began.json()
        assert target["via"] == "store"
        headers = dict(target["headers"])
        if store_ledger.store.url.startswith("s3://"):
            signed = parse_qs(urlsplit(target["url"]).query)["X-Amz-SignedHeaders"][0]
            assert "content-length" in signed.split(";"), signed
            assert headers["Content-Length"] == "13"
        headers.pop("Content-Length", None)
        parked = await asyncio.to_thread(httpx.put, target["url"], content=b"x" * (1 << 20),
                                         headers=headers)
        assert parked.status_code in (201, 200, 403), parked.text  # 403: real S3
        if parked.status_code == 403:
            return
        problem(await client.post(f"/uploads/{target['id']}/complete"), 400)
        store_ledger.transitions.offset = store_ledger.settings.direct_upload_expiry + 3600
        try:
            for _ in range(3):
                await Sweeper(store_ledger).run_once()
        finally:
            store_ledger.transitions.offset = 0
        assert await leftovers(store_ledger) == {"documents": [], "blobs": [], "stored": []}
