"""Hostile and careless input, in process, on SQLite and PostgreSQL: each a clear 4xx (or
the RFC's fallback), never a 500, never a 503 for the client's own mistake."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from blobledger import Ledger
from blobledger.api import create_app
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores.local import LocalStore
from tests.api.conftest import client_for, problem
from tests.support.services import free_port

B = "hostile"


def form(name: bytes, data: bytes, content_type: bytes) -> tuple[dict[str, str], bytes]:
    body = (f"--{B}\r\n".encode() + b'Content-Disposition: form-data; name="name"\r\n\r\n'
            + name + b"\r\n" + f"--{B}\r\n".encode()
            + b'Content-Disposition: form-data; name="file"; filename="f.html"\r\n'
            + b"Content-Type: " + content_type + b"\r\n\r\n" + data + b"\r\n"
            + f"--{B}--\r\n".encode())
    return {"Content-Type": f"multipart/form-data; boundary={B}"}, body


async def create(client: httpx.AsyncClient, name: str, data: bytes = b"data",
                 content_type: str = "text/plain") -> dict[str, Any]:
    response = await client.post("/documents", params={"name": name}, content=data,
                                 headers={"Content-Type": content_type})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def raw_asgi(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]],
                   body: bytes = b"") -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One request straight into the ASGI app, headers as given (no client library checks)."""
    path, _, query = path.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": query.encode(), "headers": headers, "scheme": "http",
             "server": ("test", 80), "client": ("127.0.0.1", 1)}
    sent: list[dict[str, Any]] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    return (start["status"], list(start["headers"]),
            b"".join(m.get("body", b"") for m in sent[1:]))


# -- 2. content types: grammar, and nothing stored reaches a header unchecked -------------
@pytest.mark.parametrize("content_type", [
    b"text/html\n; x=1", b"text/html\x0b", b"text/html\x0c; x=1", b"text/html; x=\"a\nb\"",
    b"text/html;\rSet-Cookie: a=b",
])
async def test_a_part_content_type_with_line_breaks_is_refused(
        hostile: httpx.AsyncClient, content_type: bytes) -> None:
    headers, body = form(b"page.html", b"<p>hi</p>", content_type)
    refused = problem(await hostile.post("/documents", headers=headers, content=body), 400)
    assert str(refused["type"]).endswith((":invalid-input", ":invalid-multipart"))
    assert (await hostile.get("/documents")).json()["items"] == []


async def test_a_replace_cannot_poison_a_document(hostile: httpx.AsyncClient) -> None:
    doc = await create(hostile, "kept.txt", b"original")
    headers, body = form(b"kept.txt", b"<p>new</p>", b"text/html\n; x=1")
    headers["If-Match"] = '"1"'
    problem(await hostile.put(f"/documents/{doc['id']}/content", headers=headers,
                              content=body), 400, "invalid-input")
    download = await hostile.get(f"/documents/{doc['id']}/content")
    assert download.status_code == 200 and download.content == b"original"
    assert download.headers["content-type"] == "text/plain"


async def test_a_header_injection_in_a_raw_content_type_is_refused(
        hostile_ledger: Ledger) -> None:
    app = create_app(hostile_ledger)
    status, _, body = await raw_asgi(app, "POST", "/documents?name=x", [
        (b"authorization", b"Bearer rw"), (b"content-length", b"3"),
        (b"content-type", b"text/html;\r\nSet-Cookie: a=b")], b"abc")
    assert status == 400 and json.loads(body)["type"].endswith(":invalid-input")


async def test_a_stored_invalid_content_type_is_not_sent_as_a_header(
        hostile: httpx.AsyncClient, hostile_ledger: Ledger) -> None:
    doc = await create(hostile, "old.html", b"<p>old</p>", "text/html")
    async with hostile_ledger.db.session() as session:  # as stored before the grammar check
        await session.execute(text("UPDATE documents SET content_type = :ct WHERE id = :id"),
                              {"ct": "text/html\n; x=1", "id": doc["id"]})
    download = await hostile.get(f"/documents/{doc['id']}/content")
    assert download.status_code == 200 and download.content == b"<p>old</p>"
    assert download.headers["content-type"] == "application/octet-stream"


# -- 3. conditional and range headers: never a 500 -----------------------------------------
async def test_latin1_digits_and_huge_numbers_in_headers(hostile: httpx.AsyncClient) -> None:
    doc = await create(hostile, "digits.txt", b"0123456789")
    url = f"/documents/{doc['id']}"
    superscript = '"\xb2"'.encode("latin-1")
    assert (await hostile.get(f"{url}/content", headers={b"If-None-Match": superscript})
            ).status_code == 200
    assert (await hostile.get(url, headers={b"If-None-Match": superscript})).status_code == 200
    ranged = await hostile.get(f"{url}/content",
                               headers={b"Range": b"bytes=0-1", b"If-Range": superscript})
    assert ranged.status_code == 200 and ranged.content == b"0123456789"  # the fallback
    problem(await hostile.put(f"{url}/content", content=b"x",
                              headers={b"If-Match": superscript}), 412, "precondition-failed")
    problem(await hostile.delete(url, headers={b"If-Match": superscript}), 412,
            "precondition-failed")
    huge = "9" * 5000
    problem(await hostile.get(f"{url}/content", headers={"Range": f"bytes={huge}-"}), 416,
            "range-not-satisfiable")
    whole = await hostile.get(f"{url}/content", headers={"Range": f"bytes=2-{huge}"})
    assert whole.status_code == 206 and whole.content == b"23456789"
    suffix = await hostile.get(f"{url}/content", headers={"Range": f"bytes=-{huge}"})
    assert suffix.status_code == 206 and suffix.content == b"0123456789"
    arabic = await hostile.get(f"{url}/content", headers={b"Range": "bytes=\u0663-".encode()})
    assert arabic.status_code == 200  # not ASCII digits: not a range, ignored
    problem(await hostile.post("/documents", params={"name": "n"}, content=b"x",
                               headers={b"Content-Length": "\xb2".encode("latin-1")}), 400)


@pytest.mark.parametrize("if_match", ["1", '"0001"', "W/\"1\"", '"1', "1, 2", '" 1"'])
async def test_if_match_is_a_quoted_entity_tag_compared_exactly(
        hostile: httpx.AsyncClient, if_match: str) -> None:
    doc = await create(hostile, "etag.txt")
    url = f"/documents/{doc['id']}"
    problem(await hostile.put(f"{url}/content", content=b"x", headers={"If-Match": if_match}),
            412, "precondition-failed")
    problem(await hostile.delete(url, headers={"If-Match": if_match}), 412)
    assert (await hostile.delete(url, headers={"If-Match": '"1"'})).status_code == 204


async def test_if_match_on_an_unknown_document_is_412(hostile: httpx.AsyncClient) -> None:
    unknown = "/documents/0123456789abcdef0123456789abcdef"
    problem(await hostile.delete(unknown, headers={"If-Match": "*"}), 412,
            "precondition-failed")
    problem(await hostile.delete(unknown, headers={"If-Match": '"1"'}), 412)
    problem(await hostile.put(f"{unknown}/content", content=b"x", headers={"If-Match": "*"}),
            412)
    problem(await hostile.delete(unknown), 404, "not-found")


# -- 4. /readyz says ready or not, never where -----------------------------------------------
async def test_readyz_names_no_host_user_port_database_or_folder(tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://secretuser:secretpass@127.0.0.1:{port}/secretdb"
    store = LocalStore(tmp_path / "secretfolder")
    ledger = Ledger(Database(url), store, Settings(database_url=url, store_url=store.url))
    try:
        async with client_for(ledger) as client:
            down = await client.get("/readyz")
            body = problem(down, 503, "not-ready")
            assert body["detail"] == "the database is not reachable"
            for secret in ("secretuser", "secretpass", "secretdb", str(port), "127.0.0.1"):
                assert secret not in down.text
    finally:
        await ledger.close()
    db_url = f"sqlite:///{tmp_path / 'ok.db'}"
    ledger = Ledger(Database(db_url), LocalStore(tmp_path / "secretfolder"),
                    Settings(database_url=db_url, store_url=store.url))
    async with ledger:
        (tmp_path / "secretfolder" / "blobs").rename(tmp_path / "moved")
        async with client_for(ledger) as client:
            down = await client.get("/readyz")
            problem(down, 503, "not-ready")
            assert "secretfolder" not in down.text and str(tmp_path) not in down.text


# -- 5. a NUL is the client's mistake, not an outage ---------------------------------------
async def test_a_nul_in_a_prefix_or_an_id_is_400_or_404(hostile: httpx.AsyncClient) -> None:
    await create(hostile, "plain.txt")
    problem(await hostile.get("/documents?prefix=%00"), 400, "invalid-input")
    problem(await hostile.get("/documents?prefix=a%00b"), 400, "invalid-input")
    problem(await hostile.get("/documents/%00"), 404, "not-found")
    problem(await hostile.get("/documents/a%00b/content"), 404, "not-found")
    problem(await hostile.delete("/documents/%00"), 404, "not-found")
    cursor = "AA"  # the base64 of a NUL
    problem(await hostile.get(f"/documents?cursor={cursor}"), 400)


# -- 6. prefixes are case-sensitive on every database --------------------------------------
async def test_prefixes_match_case_sensitively(hostile: httpx.AsyncClient) -> None:
    await create(hostile, "secret/plan.txt")
    await create(hostile, "Secret/other.txt")
    names = [d["name"] for d in (await hostile.get("/documents?prefix=SECRET/")).json()["items"]]
    assert names == []
    names = [d["name"] for d in (await hostile.get("/documents?prefix=secret/")).json()["items"]]
    assert names == ["secret/plan.txt"]
    names = [d["name"] for d in (await hostile.get("/documents?prefix=%25")).json()["items"]]
    assert names == []  # LIKE wildcards are plain characters


# -- 7. names that look alike --------------------------------------------------------------
async def test_nfc_and_nfd_are_one_name(hostile: httpx.AsyncClient) -> None:
    nfc = await create(hostile, unicodedata.normalize("NFC", "café.txt"))
    assert nfc["name"] == "caf\u00e9.txt"
    taken = await hostile.post("/documents", params={"name": "cafe\u0301.txt"}, content=b"x")
    problem(taken, 409, "name-taken")
    listed = await hostile.get("/documents", params={"prefix": "cafe\u0301"})
    assert [d["name"] for d in listed.json()["items"]] == ["caf\u00e9.txt"]


@pytest.mark.parametrize("name", [
    "invoice\u202etxt.exe", "a\u200bb.txt", "zero\u200dwidth", "line\u2028sep", "bom\ufeff",
    "\uff46ile.pdf", "isolate\u2066x\u2069", "private\ue000",
])
async def test_invisible_and_lookalike_names_are_refused(
        hostile: httpx.AsyncClient, name: str) -> None:
    response = await hostile.post("/documents", params={"name": name}, content=b"x")
    problem(response, 400, "invalid-input")


# -- held: traversal, tokens, limits -------------------------------------------------------
@pytest.mark.parametrize("name", ["../../etc/passwd", "a/../../b", "/etc/passwd", "..\\x"])
async def test_traversal_names_are_refused_and_nothing_escapes_the_store(
        hostile: httpx.AsyncClient, hostile_ledger: Ledger, tmp_path: Path, name: str) -> None:
    problem(await hostile.post("/documents", params={"name": name}, content=b"x"), 400)
    doc = await create(hostile, "ok/../ok.txt".replace("../", "") + "-" + str(len(name)))
    root = tmp_path / "store"
    written = [p for p in tmp_path.rglob("*") if p.is_file()
               and not p.name.startswith("ledger.db")]
    assert written and all(root in p.parents for p in written), written
    assert doc["blob"].startswith("documents/")


async def test_tokens_hold(hostile_ledger: Ledger) -> None:
    async with client_for(hostile_ledger) as client:
        problem(await client.get("/documents"), 401, "unauthorized")
        problem(await client.get("/documents?access_token=rw"), 401, "unauthorized")
        problem(await client.get("/documents", headers={"Authorization": "Bearer rwx"}), 401)
        problem(await client.get("/documents", headers={"Authorization": "Bearer RW"}), 401)
        problem(await client.post("/documents", params={"name": "n"}, content=b"x",
                                  headers={"Authorization": "Bearer ro"}), 403, "forbidden")
        assert (await client.get("/documents", headers={"Authorization": "Bearer ro"})
                ).status_code == 200


async def test_limits_hold(hostile_ledger: Ledger) -> None:
    small = hostile_ledger.settings.with_(max_upload_bytes=100)
    async with client_for(hostile_ledger, small) as client:
        client.headers["Authorization"] = "Bearer rw"
        problem(await client.get("/documents", headers={"X-Big": "x" * 9000}), 431)
        problem(await client.post("/documents", params={"name": "big"}, content=b"x" * 101),
                413, "upload-too-large")


# -- smaller deviations ------------------------------------------------------------------------
async def test_no_redirect_built_from_the_host_header(hostile: httpx.AsyncClient) -> None:
    response = await hostile.get("/documents/", headers={"Host": "localhost:9"})
    problem(response, 404)
    assert "location" not in response.headers


async def test_head_is_answered_where_get_is(hostile: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/documents"):
        response = await hostile.head(path)
        assert response.status_code == 200, path
