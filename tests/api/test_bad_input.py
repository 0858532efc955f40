"""Bad input: each its own clear 4xx problem, and nothing left but at most a pending intent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from blobledger import Ledger
from blobledger.config import Settings
from tests.api.conftest import assert_nothing_visible, client_for, leftovers, problem
from tests.conftest import BACKENDS, ONE_BACKEND

B = "xyzzy"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={B}"}


def part(field: str, value: bytes, filename: bytes | None = None) -> bytes:
    disposition = b'form-data; name="' + field.encode() + b'"'
    if filename is not None:
        disposition += b'; filename="' + filename + b'"'
    return (f"--{B}\r\n".encode() + b"Content-Disposition: " + disposition + b"\r\n\r\n"
            + value + b"\r\n")


END = f"--{B}--\r\n".encode()


def q(name: str) -> str:
    return "/documents?" + urlencode({"name": name})


D = "/documents"
# (id, url, headers, body, status, problem type)
CASES: list[tuple[str, str, dict[str, str], bytes, int, str]] = [
    ("name-traversal-query", q("../../etc/passwd"), {}, b"x", 400, "invalid-input"),
    ("name-absolute", q("/etc/passwd"), {}, b"x", 400, "invalid-input"),
    ("name-backslash", q("..\\win.ini"), {}, b"x", 400, "invalid-input"),
    ("name-control-char-query", q("a\x1bb"), {}, b"x", 400, "invalid-input"),
    ("name-control-char-form", D, MULTIPART,
     part("name", b"a\x00b") + part("file", b"data", b"f.txt") + END, 400, "invalid-input"),
    ("name-traversal-form", D, MULTIPART,
     part("name", b"a/../../b") + part("file", b"data", b"f.txt") + END, 400, "invalid-input"),
    ("filename-traversal", D, MULTIPART,
     part("name", b"n") + part("file", b"data", b"../../etc/passwd") + END,
     400, "invalid-filename"),
    ("filename-control-char", D, MULTIPART,
     part("name", b"n") + part("file", b"data", b"evil\x07.txt") + END,
     400, "invalid-filename"),
    ("name-invalid-utf8-form", D, MULTIPART,
     part("name", b"caf\xe9") + part("file", b"data", b"f.txt") + END, 400, "invalid-multipart"),
    ("filename-invalid-utf8", D, MULTIPART,
     part("name", b"n") + part("file", b"data", b"caf\xe9.txt") + END, 400, "invalid-multipart"),
    ("name-invalid-utf8-query", "/documents?name=caf%E9", {}, b"x", 400, "invalid-input"),
    ("empty-file-field", D, MULTIPART,
     part("name", b"n") + part("file", b"", b"f.txt") + END, 400, "invalid-multipart"),
    ("no-file-field", D, MULTIPART, part("name", b"n") + END, 400, "invalid-multipart"),
    ("missing-name-raw", D, {}, b"x", 400, "missing-name"),
    ("missing-name-form", D, MULTIPART, part("file", b"data") + END, 400, "missing-name"),
    ("missing-name-after-file", D, MULTIPART, part("file", b"data", b"f.txt") + END,
     400, "missing-name"),
    ("name-after-file-traversal", D, MULTIPART,
     part("file", b"data", b"f.txt") + part("name", b"../x") + END, 400, "invalid-input"),
    ("name-twice-differs", D, MULTIPART,
     part("name", b"first") + part("file", b"data", b"f.txt") + part("name", b"other") + END,
     400, "invalid-multipart"),
    ("two-files", D, MULTIPART,
     part("name", b"n") + part("file", b"a", b"a") + part("file", b"b", b"b") + END,
     400, "invalid-multipart"),
    ("unterminated-form", D, MULTIPART, part("name", b"n") + part("file", b"data", b"f"),
     400, "invalid-multipart"),
    ("garbage-form", D, MULTIPART, b"this is not multipart at all", 400, "invalid-multipart"),
    ("form-without-boundary", q("n"), {"Content-Type": "multipart/form-data"}, b"x",
     400, "invalid-input"),
    ("bad-content-type", q("n"), {"Content-Type": "not a media type"}, b"x",
     400, "invalid-input"),
    ("huge-header", q("n"), {"X-Padding": "p" * 20_000}, b"x", 431, "headers-too-large"),
    ("idempotency-key-too-long", q("n"), {"Idempotency-Key": "k" * 300}, b"x",
     400, "invalid-input"),
    ("body-shorter-than-length", q("n"), {"Content-Length": "100"}, b"only 17 bytes...",
     400, "incomplete-body"),
    ("form-shorter-than-length", D, {**MULTIPART, "Content-Length": "5000"},
     part("name", b"n") + part("file", b"data", b"f.txt") + END, 400, "incomplete-body"),
]


#: the cases refused after the body's bytes began to go to the store (an intent committed, a
#: put begun): what is left is the protocol's and the store's, so they run on every backend;
#: the others are refused by the HTTP layer before any transaction or store call (which the
#: test checks), on one backend (tests/conftest.py)
REACH_THE_STORE = {"missing-name-form", "missing-name-after-file", "name-after-file-traversal",
                   "name-twice-differs", "two-files", "unterminated-form",
                   "body-shorter-than-length", "form-shorter-than-length"}
BAD_UPLOADS = [pytest.param(backend, *case[1:], case[0] in REACH_THE_STORE,
                            id=f"{backend}-{case[0]}")
               for case in CASES
               for backend in (BACKENDS if case[0] in REACH_THE_STORE else ONE_BACKEND)]


def calls_to_the_protocol(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The transactions and store calls made from now on (names, in order)."""
    calls: list[str] = []
    targets = [(type(ledger.db), ("session", "transaction")),
               (type(ledger.store), ("put", "begin_staged", "stage", "set_tags", "delete"))]
    for owner, names in targets:
        for name in names:
            real = getattr(owner, name)

            def counted(*args: object, _real: Any = real, _name: str = name,
                        **kwargs: object) -> Any:
                calls.append(_name)
                return _real(*args, **kwargs)

            monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize(("backend", "url", "headers", "body", "status", "kind", "reaches"),
                         BAD_UPLOADS, indirect=["backend"])
async def test_bad_upload_is_refused_and_leaves_nothing(
    client: httpx.AsyncClient, ledger: Ledger, url: str, headers: dict[str, str],
    body: bytes, status: int, kind: str, reaches: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as patched:
        calls = calls_to_the_protocol(ledger, patched)
        response = await client.post(url, headers=headers, content=body)
    problem(response, status, kind)
    assert bool(calls) == reaches, calls  # a case on one backend never reaches the protocol
    await assert_nothing_visible(ledger)
    assert (await client.get("/documents")).json()["items"] == []


async def test_too_large_is_413_before_and_while_reading(ledger: Ledger) -> None:
    small = ledger.settings.with_(max_upload_bytes=1000)
    read: list[int] = []

    async def body(size: int) -> AsyncIterator[bytes]:
        for _ in range(size // 100):
            read.append(100)
            yield b"x" * 100

    async with client_for(ledger, small) as client:
        early = await client.post("/documents", params={"name": "big"}, content=b"x" * 2000)
        problem(early, 413, "upload-too-large")
        declared = await client.post("/documents", params={"name": "big"}, content=body(2000),
                                     headers={"Content-Length": "2000"})
        problem(declared, 413, "upload-too-large")
        assert read == []  # refused from Content-Length, before a byte was read
        chunked = await client.post("/documents", params={"name": "big"}, content=body(5000))
        problem(chunked, 413, "upload-too-large")
        assert 1000 < sum(read) < 5000  # refused while streaming, without reading it all
        exact = await client.post("/documents", params={"name": "fits"}, content=b"y" * 1000)
        assert exact.status_code == 201
    left = await leftovers(ledger)
    assert left == {"documents": ["ready"], "blobs": ["committed"], "stored": ["committed"]}


async def test_upload_past_its_deadline_is_aborted(ledger: Ledger) -> None:
    quick = Settings(database_url=ledger.settings.database_url,
                     store_url=ledger.settings.store_url, upload_deadline=0.5, sweep_after=61)
    hurried = Ledger(ledger.db, ledger.store, quick)  # shares (and leaves open) db and store

    async def slow() -> AsyncIterator[bytes]:
        yield b"start"
        await asyncio.sleep(1.0)
        yield b"too late"

    async with client_for(hurried) as client:
        response = await client.post("/documents", params={"name": "slow"}, content=slow())
        problem(response, 408, "upload-aborted")
    await assert_nothing_visible(ledger)


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_tokens_scope_reads_and_writes(ledger: Ledger) -> None:
    settings = ledger.settings.with_(api_tokens={
        "reader-token": frozenset({"read"}), "writer-token": frozenset({"read", "write"})})
    async with client_for(ledger, settings) as client:
        anonymous = await client.post("/documents", params={"name": "n"}, content=b"x")
        problem(anonymous, 401, "unauthorized")
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = await client.get("/documents", headers={"Authorization": "Bearer nope"})
        problem(wrong, 401, "unauthorized")
        basic = await client.get("/documents", headers={"Authorization": "Basic dTpw"})
        problem(basic, 401, "unauthorized")
        reader = {"Authorization": "Bearer reader-token"}
        writer = {"Authorization": "Bearer writer-token"}
        problem(await client.post("/documents", params={"name": "n"}, content=b"x",
                                  headers=reader), 403, "forbidden")
        created = await client.post("/documents", params={"name": "n"}, content=b"x",
                                    headers=writer)
        assert created.status_code == 201
        doc_id = created.json()["id"]
        assert (await client.get(f"/documents/{doc_id}/content", headers=reader)).content == b"x"
        problem(await client.delete(f"/documents/{doc_id}", headers=reader), 403, "forbidden")
        problem(await client.get(f"/documents/{doc_id}"), 401, "unauthorized")
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200
