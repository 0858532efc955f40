"""The document endpoints in-process, on {SQLite, PostgreSQL} x {local disk, Azurite}."""

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
from blobledger.protocol.models import DocumentRow
from tests.api.conftest import assert_nothing_visible, leftovers, problem
from tests.conftest import EACH_DATABASE, ONE_BACKEND

DOC_KEYS = {"id", "name", "status", "version", "size", "content_type", "sha256", "md5",
            "blob", "created_at", "updated_at", "bucket"}


def form(name: str | None, data: bytes, *, filename: str = "upload.bin",
         name_first: bool = True, content_type: str = "application/pdf"
         ) -> tuple[bytes, dict[str, str]]:
    """A multipart body built by hand, so that the order of the parts is ours."""
    boundary = "b0undary" + os.urandom(4).hex()
    name_part = (f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'
                 f"{name}\r\n".encode()) if name is not None else b""
    file_part = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="{filename}"\r\nContent-Type: {content_type}\r\n\r\n'
                 ).encode() + data + b"\r\n"
    parts = name_part + file_part if name_first else file_part + name_part
    body = parts + f"--{boundary}--\r\n".encode()
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


async def test_create_show_list_download(client: httpx.AsyncClient, ledger: Ledger) -> None:
    data = os.urandom(300_000)  # staged on Azure (the test store's single-put limit is 256 KiB)
    body, headers = form("reports/q1.pdf", data)
    created = await client.post("/documents", content=body, headers=headers)
    assert created.status_code == 201, created.text
    doc = created.json()
    assert set(doc) == DOC_KEYS
    assert (doc["name"], doc["status"], doc["version"], doc["size"], doc["content_type"]) == (
        "reports/q1.pdf", "ready", 1, len(data), "application/pdf")
    assert doc["sha256"] == hashlib.sha256(data).hexdigest()
    assert doc["md5"] == hashlib.md5(data).hexdigest()
    assert created.headers["location"] == f"/documents/{doc['id']}"
    assert created.headers["etag"] == '"1"'

    # the file first, the name after it: accepted when the name equals the filename
    body, headers = form("after.txt", b"second", filename="after.txt", name_first=False,
                         content_type="text/plain")
    second = await client.post("/documents", content=body, headers=headers)
    assert second.status_code == 201, second.text
    # a raw body named in the query, typed by its Content-Type
    raw = await client.post("/documents", params={"name": "résumé \"final\".txt"},
                            content=b"raw bytes", headers={"Content-Type": "text/plain"})
    assert raw.status_code == 201, raw.text
    assert raw.json()["content_type"] == "text/plain"

    shown = await client.get(f"/documents/{doc['id']}")
    assert shown.status_code == 200 and shown.json() == doc and shown.headers["etag"] == '"1"'
    head = await client.head(f"/documents/{doc['id']}")
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == '"1"'
    assert (await client.get(f"/documents/{doc['id']}",
                             headers={"If-None-Match": '"1"'})).status_code == 304

    listed = (await client.get("/documents")).json()
    assert [d["name"] for d in listed["items"]] == ["after.txt", "reports/q1.pdf",
                                                    "résumé \"final\".txt"]
    assert listed["next_cursor"] is None

    got = await client.get(f"/documents/{doc['id']}/content")
    assert got.status_code == 200 and got.content == data
    assert got.headers["content-length"] == str(len(data))
    assert got.headers["content-type"] == "application/pdf"
    assert got.headers["etag"] == '"1"' and got.headers["last-modified"].endswith(" GMT")
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-disposition"] == (
        "inline; filename=\"q1.pdf\"; filename*=UTF-8''q1.pdf")
    digest = base64.b64encode(hashlib.sha256(data).digest()).decode()
    assert got.headers["repr-digest"] == f"sha-256=:{digest}:"

    part = await client.get(f"/documents/{doc['id']}/content",
                            headers={"Range": "bytes=1000-1999"})
    assert part.status_code == 206 and part.content == data[1000:2000]
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    tail = await client.get(f"/documents/{doc['id']}/content", headers={"Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == data[-10:]
    stale_range = await client.get(f"/documents/{doc['id']}/content",
                                   headers={"Range": "bytes=0-9", "If-Range": '"7"'})
    assert stale_range.status_code == 200 and stale_range.content == data
    beyond = await client.get(f"/documents/{doc['id']}/content",
                              headers={"Range": f"bytes={len(data)}-"})
    problem(beyond, 416, "range-not-satisfiable")
    assert beyond.headers["content-range"] == f"bytes */{len(data)}"
    cached = await client.get(f"/documents/{doc['id']}/content",
                              headers={"If-None-Match": 'W/"0", "1"'})
    assert cached.status_code == 304 and cached.content == b""
    head = await client.head(f"/documents/{doc['id']}/content")
    assert head.status_code == 200 and head.headers["content-length"] == str(len(data))

    quoted = await client.get(f"/documents/{raw.json()['id']}/content")
    assert quoted.content == b"raw bytes"
    assert quoted.headers["content-disposition"] == (
        "inline; filename=\"resume _final_.txt\"; "
        "filename*=UTF-8''r%C3%A9sum%C3%A9%20%22final%22.txt")
    problem(await client.get("/documents/0123456789abcdef0123456789abcdef"), 404, "not-found")
    problem(await client.get("/documents/nope/content"), 404, "not-found")


async def test_replace_and_delete_are_conditional(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    doc = (await client.post("/documents", params={"name": "a.txt"}, content=b"one",
                             headers={"Content-Type": "text/plain"})).json()
    url = f"/documents/{doc['id']}"
    problem(await client.put(f"{url}/content", content=b"two"), 428, "precondition-required")
    stale = await client.put(f"{url}/content", content=b"two", headers={"If-Match": '"9"'})
    assert problem(stale, 412, "precondition-failed")["current_version"] == 1
    replaced = await client.put(f"{url}/content", content=b"two", headers={"If-Match": '"1"'})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["version"] == 2 and replaced.headers["etag"] == '"2"'
    assert replaced.json()["content_type"] == "text/plain"  # kept when none is sent
    assert (await client.get(f"{url}/content")).content == b"two"
    body, headers = form(None, b"three", content_type="text/markdown")
    anyway = await client.put(f"{url}/content", content=body,
                              headers={**headers, "If-Match": "*"})
    assert anyway.status_code == 200, anyway.text
    assert (anyway.json()["version"], anyway.json()["content_type"]) == (3, "text/markdown")

    problem(await client.delete(url, headers={"If-Match": '"2"'}), 412, "precondition-failed")
    assert (await client.delete(url, headers={"If-Match": '"3"'})).status_code == 204
    problem(await client.get(url), 404, "not-found")
    problem(await client.delete(url), 404, "not-found")
    again = await client.post("/documents", params={"name": "b"}, content=b"x")
    assert (await client.delete(f"/documents/{again.json()['id']}")).status_code == 204
    left = await leftovers(ledger)
    assert left["documents"] == [] and set(left["blobs"]) == {"deleting"}


async def test_idempotent_retries(client: httpx.AsyncClient, ledger: Ledger) -> None:
    key = {"Idempotency-Key": "upload-7f3a"}
    first = await client.post("/documents", params={"name": "k.bin"}, content=b"payload",
                              headers=key)
    retry = await client.post("/documents", params={"name": "k.bin"}, content=b"payload",
                              headers=key)
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert (await leftovers(ledger))["blobs"] == ["committed"]
    other = await client.post("/documents", params={"name": "k.bin"}, content=b"other",
                              headers=key)
    problem(other, 422, "idempotency-conflict")

    # a retry while the first attempt still streams: 409 with Retry-After
    release = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"first half "
        await release.wait()
        yield b"second half"

    running = asyncio.create_task(client.post(
        "/documents", params={"name": "slow.bin"}, content=slow(),
        headers={"Idempotency-Key": "slow-key"}))
    for _ in range(200):
        if (await leftovers(ledger))["blobs"].count("pending"):
            break
        await asyncio.sleep(0.01)
    busy = await client.post("/documents", params={"name": "slow.bin"}, content=b"x",
                             headers={"Idempotency-Key": "slow-key"})
    problem(busy, 409, "idempotency-in-progress")
    assert busy.headers["retry-after"] == "1"
    release.set()
    done = await running
    assert done.status_code == 201 and done.json()["size"] == len(b"first half second half")


async def test_checksum_headers(client: httpx.AsyncClient, ledger: Ledger) -> None:
    data = b"checked bytes"
    sha = base64.b64encode(hashlib.sha256(data).digest()).decode()
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    ok = await client.post("/documents", params={"name": "ok"}, content=data,
                           headers={"Repr-Digest": f"sha-256=:{sha}:", "Content-MD5": md5})
    assert ok.status_code == 201, ok.text
    body, headers = form("form-ok", data)
    ok = await client.post("/documents", content=body,
                           headers={**headers, "Repr-Digest": f"sha-256=:{sha}:"})
    assert ok.status_code == 201, ok.text
    before = await leftovers(ledger)
    wrong = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
    bad = await client.post("/documents", params={"name": "bad"}, content=data,
                            headers={"Repr-Digest": f"sha-256=:{wrong}:"})
    problem(bad, 400, "checksum-mismatch")
    bad_md5 = await client.post("/documents", params={"name": "bad"}, content=data,
                                headers={"Content-MD5": wrong[:24]})
    problem(bad_md5, 400, "invalid-input")
    malformed = await client.post("/documents", params={"name": "bad"}, content=data,
                                  headers={"Repr-Digest": "sha-256=abc"})
    problem(malformed, 400, "invalid-input")
    assert await leftovers(ledger) == before


@pytest.mark.parametrize("backend", EACH_DATABASE, indirect=True)
async def test_list_pages_and_prefix(client: httpx.AsyncClient) -> None:
    for name in ["a/1", "a/2", "a/3", "b/1", "a%_"]:
        assert (await client.post("/documents", params={"name": name}, content=b".")
                ).status_code == 201
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"prefix": "a/", "limit": "2", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/documents", params=params)).json()
        seen += [d["name"] for d in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["a/1", "a/2", "a/3"] and pages == 2
    assert [d["name"] for d in (await client.get("/documents", params={"prefix": "a%"})
                                ).json()["items"]] == ["a%_"]
    problem(await client.get("/documents", params={"cursor": "!!"}), 400, "invalid-cursor")
    problem(await client.get("/documents", params={"limit": "0"}), 400, "invalid-input")
    problem(await client.get("/documents", params={"limit": "x"}), 400, "invalid-input")


async def test_race_of_fifty_creates(client: httpx.AsyncClient, ledger: Ledger) -> None:
    responses = await asyncio.gather(*[
        client.post("/documents", params={"name": "contested"}, content=f"{i}".encode())
        for i in range(50)])
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * 49, statuses
    for r in responses:
        if r.status_code == 409:
            problem(r, 409, "name-taken")
    assert (await leftovers(ledger))["documents"] == ["ready"]
    await assert_nothing_visible_except_one(ledger)


async def assert_nothing_visible_except_one(ledger: Ledger) -> None:
    left = await leftovers(ledger)
    assert left == {"documents": ["ready"], "blobs": ["committed"], "stored": ["committed"]}


async def test_service_endpoints(client: httpx.AsyncClient, ledger: Ledger) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready"}
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200 and "python_info" in metrics.text
    schema = (await client.get("/openapi.json")).json()
    assert {"/documents", "/documents/{doc_id}", "/documents/{doc_id}/content"} <= set(
        schema["paths"])
    problem(await client.get("/nowhere"), 404)
    problem(await client.patch("/documents"), 405)
    await assert_nothing_visible(ledger)


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_if_match_compares_strongly(client: httpx.AsyncClient) -> None:
    doc = (await client.post("/documents", params={"name": "w"}, content=b"1")).json()
    url = f"/documents/{doc['id']}"
    problem(await client.put(f"{url}/content", content=b"2", headers={"If-Match": 'W/"1"'}),
            412, "precondition-failed")
    listed = await client.put(f"{url}/content", content=b"2", headers={"If-Match": '"0", "1"'})
    assert listed.status_code == 200 and listed.json()["version"] == 2
    assert (await client.get(f"{url}/content", headers={"If-None-Match": 'W/"2"'})
            ).status_code == 304
    problem(await client.delete(url, headers={"If-Match": "garbage"}), 412,
            "precondition-failed")


async def test_form_with_the_name_after_the_file(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    """``curl -F file=@a -F name=b`` sends the file first: the name arrives after the bytes.
    The intent is recorded under a placeholder and renamed before the blob is committed."""
    boundary = "b0undary"

    def form(name: bytes, data: bytes) -> bytes:
        return (f"--{boundary}\r\n".encode()
                + b'Content-Disposition: form-data; name="file"; filename="upload.bin"\r\n'
                + b"Content-Type: text/plain\r\n\r\n" + data + b"\r\n"
                + f"--{boundary}\r\n".encode()
                + b'Content-Disposition: form-data; name="name"\r\n\r\n' + name + b"\r\n"
                + f"--{boundary}--\r\n".encode())

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    created = await client.post("/documents", content=form(b"reports/late.txt", b"late name"),
                                headers=headers)
    assert created.status_code == 201, created.text
    doc = created.json()
    assert (doc["name"], doc["size"], doc["content_type"]) == ("reports/late.txt", 9,
                                                                "text/plain")
    listed = (await client.get("/documents")).json()["items"]
    assert [d["name"] for d in listed] == ["reports/late.txt"]

    # the same late name again: taken, found only after the bytes, compensated
    taken = await client.post("/documents", content=form(b"reports/late.txt", b"other bytes"),
                              headers=headers)
    assert taken.status_code == 409, taken.text
    assert taken.json()["type"] == "urn:blobledger:problem:name-taken"
    async with ledger.db.session() as session:
        names = (await session.execute(select(DocumentRow.name))).scalars().all()
    assert names == ["reports/late.txt"]
    assert len([i async for i in ledger.store.list()]) == 1
