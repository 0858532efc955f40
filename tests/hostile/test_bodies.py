"""Bodies from clients that hold no token, send too slowly or reserve too much: the token is
checked on the request head (the body is never read), a trickling body is cut, and one token
holds a bounded number of open uploads and names. Real ``blobledger serve`` processes, raw
sockets."""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.hostile.support import Served, connect, is_closed, read_response, serve

WRITER = "writer-token-0123456789"
READER = "reader-token-0123456789"
HOARDER = "hoarder-token-0123456789"
BIG = 256 * 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve(env={
        "BLOBLEDGER_API_TOKENS": f"{WRITER}:write,{READER}:read,{HOARDER}:write",
        "BLOBLEDGER_MAX_UPLOADS": "10", "BLOBLEDGER_MAX_CONNECTIONS": "40",
        "BLOBLEDGER_MIN_BODY_RATE": "1000", "BLOBLEDGER_BODY_RATE_WINDOW": "1s",
        "BLOBLEDGER_MAX_OPEN_UPLOADS": "3", "BLOBLEDGER_MAX_RESERVED_NAMES": "2",
    }) as served:
        yield served


def bearer(token: str | None) -> bytes:
    return b"" if token is None else b"Authorization: Bearer " + token.encode() + b"\r\n"


def upload_head(token: str | None, length: int) -> bytes:
    return (b"POST /uploads HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + bearer(token) + b"Content-Length: " + str(length).encode() + b"\r\n\r\n")


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("bogus", 401), (READER, 403)])
def test_a_refused_upload_is_answered_on_its_head(server: Served, token: str | None,
                                                   status: int) -> None:
    """The head of a 256 MiB ``POST /uploads`` (no token, a wrong one, a read token) is
    answered at once, without one byte of its body sent, and the connection ends."""
    sock = connect(server.port, timeout=5)
    try:
        sock.sendall(upload_head(token, BIG))
        response = read_response(sock)
        assert response.status == status
        assert response.problem()["status"] == status
        assert response.headers["connection"] == "close"
        assert is_closed(sock, 5)
    finally:
        sock.close()


def test_a_small_unauthenticated_body_is_not_drained_either(server: Served) -> None:
    """2,000 bytes after a token-less head: the 401 arrives whole every time (never lost to
    a reset) with ``Connection: close``, and the connection ends instead of reading on."""
    for _ in range(50):
        sock = connect(server.port, timeout=5)
        try:
            sock.sendall(b"POST /documents?name=x HTTP/1.1\r\nHost: localhost\r\n"
                         b"Content-Length: 2000\r\n\r\n" + b"b" * 2000)
            response = read_response(sock)
            assert response.status == 401
            assert response.problem()["type"] == "urn:blobledger:problem:unauthorized"
            assert response.headers["connection"] == "close"
            assert is_closed(sock, 5)
        finally:
            sock.close()


def test_a_256_mib_unauthenticated_body_is_never_buffered(server: Served) -> None:
    """Sending the whole 256 MiB anyway: the 401 arrives while the body is still going,
    and the server's peak memory does not grow by anything like the body."""
    before = peak_rss_kib(server.process.pid)
    sock = connect(server.port, timeout=60)  # a service that reads it all answers late
    sent = threading.Event()

    def send_body() -> None:  # valid JSON: a service that parses it answers 401 too
        chunk = b"x" * (1024 * 1024)
        try:
            sock.sendall(b'{"pad": "' + chunk[9:])
            for _ in range(BIG // len(chunk) - 2):
                sock.sendall(chunk)
            sock.sendall(chunk[2:] + b'"}')
        except OSError:
            pass
        sent.set()

    try:
        sock.sendall(upload_head(None, BIG))
        sender = threading.Thread(target=send_body)
        sender.start()
        response = read_response(sock)
        assert response.status == 401
        sender.join(60)
        assert sent.is_set()
    finally:
        sock.close()
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
    grown_mib = (peak_rss_kib(server.process.pid) - before) / 1024
    assert grown_mib < 32, f"the server's peak RSS grew by {grown_mib:.0f} MiB"


def test_a_writers_json_body_is_bounded_on_its_head(server: Served) -> None:
    """A write token's ``POST /uploads`` declaring 16 MiB of JSON: 413 ``body-too-large``
    at once, without a byte of its body read, and the connection ends."""
    sock = connect(server.port, timeout=5)
    try:
        sock.sendall(upload_head(WRITER, 16 * 1024 * 1024))
        response = read_response(sock)
        assert response.status == 413
        assert response.problem()["type"] == "urn:blobledger:problem:body-too-large"
        assert response.headers["connection"] == "close"
        assert is_closed(sock, 5)
    finally:
        sock.close()


def test_a_writers_chunked_json_body_is_cut_past_the_bound(server: Served) -> None:
    """The same JSON sent chunked (no length to read on the head): 413 once 64 KiB have
    arrived, long before the 16 MiB the client would send."""
    sock = connect(server.port, timeout=10)
    try:
        sock.sendall(b"POST /uploads HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Type: application/json\r\n" + bearer(WRITER)
                     + b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        sent = 0
        try:
            sock.sendall(b'8\r\n{"pad":"\r\n')
            for _ in range(256):
                sock.sendall(b"10000\r\n" + chunk + b"\r\n")
                sent += len(chunk)
        except OSError:
            pass
        response = read_response(sock)
        assert response.status == 413
        assert response.problem()["type"] == "urn:blobledger:problem:body-too-large"
        assert sent < 16 * 1024 * 1024 or is_closed(sock, 5)
    finally:
        sock.close()


@pytest.mark.parametrize("route", ["documents", "uploads"])
def test_a_trickling_body_is_cut_within_the_window(server: Served, route: str) -> None:
    """A token holder's body that brings a byte every 0.2 s (the minimum is 1,000 bytes/s
    over 1 s): 408 ``body-too-slow`` and the connection closed, well before the 60 s body
    timeout."""
    sock = connect(server.port, timeout=10)
    stop = threading.Event()
    if route == "documents":
        head = (b"POST /documents?name=" + uuid.uuid4().hex.encode() + b" HTTP/1.1\r\n"
                b"Host: localhost\r\n" + bearer(WRITER) + b"Content-Length: 1000\r\n\r\n")
    else:
        head = upload_head(WRITER, 1000)

    def trickle() -> None:
        while not stop.wait(0.2):
            try:
                sock.sendall(b" ")
            except OSError:
                return

    sock.sendall(head + b"{")
    started = time.monotonic()
    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        response = read_response(sock)
        elapsed = time.monotonic() - started
        assert response.status == 408, response
        assert response.problem()["type"] == "urn:blobledger:problem:body-too-slow"
        assert elapsed < 5, elapsed
        assert is_closed(sock, 5)
    finally:
        stop.set()
        sender.join()
        sock.close()


def test_100_unauthenticated_trickles_hold_no_slot(server: Served) -> None:
    """100 connections without a token, each with the head of an upload and one byte of
    its body (10 upload slots, 40 connections): each is refused at once and closed, and a
    token holder's upload, a read token's list and /healthz are served meanwhile."""
    socks = [connect(server.port, timeout=10) for _ in range(100)]
    try:
        for sock in socks:
            sock.sendall(upload_head(None, 1000) + b"{")
        headers = {"Authorization": f"Bearer {WRITER}"}
        with httpx.Client(base_url=server.url, timeout=10) as client:
            created = client.post("/documents", params={"name": uuid.uuid4().hex},
                                  content=b"bytes of a token holder", headers=headers)
            assert created.status_code == 201, created.text
            listed = client.get("/documents", headers={"Authorization": f"Bearer {READER}"})
            assert listed.status_code == 200, listed.text
            assert client.get("/healthz").status_code == 200
        assert all(is_closed(sock, 5) for sock in socks)
    finally:
        for sock in socks:
            sock.close()


def tus_create(client: httpx.Client, token: str, attachment: bool = False) -> httpx.Response:
    name = base64.b64encode(uuid.uuid4().hex.encode()).decode()
    meta = "attachment" if attachment else f"name {name}"
    return client.post("/files/", headers={
        "Authorization": f"Bearer {token}", "Tus-Resumable": "1.0.0",
        "Upload-Length": str(5 * 1024**3), "Upload-Metadata": meta})


def test_one_token_holds_a_bounded_number_of_uploads_and_names(server: Served) -> None:
    """At most 3 open uploads and 2 reserved names per token: the third named upload is a
    429 ``too-many-reserved-names``, the fourth upload a 429 ``too-many-open-uploads``
    (tus and direct alike); another token is not affected; a terminated upload frees its
    share. The database names the token only by a digest."""
    hoarder = {"Authorization": f"Bearer {HOARDER}"}
    with httpx.Client(base_url=server.url, timeout=10) as client:
        first = tus_create(client, HOARDER)
        second = client.post("/uploads", headers=hoarder,
                             json={"name": uuid.uuid4().hex, "size": 5 * 1024**3})
        assert (first.status_code, second.status_code) == (201, 201), second.text
        third = tus_create(client, HOARDER)
        assert third.status_code == 429, third.text
        assert third.json()["type"] == "urn:blobledger:problem:too-many-reserved-names"
        attachment = client.post("/uploads", headers=hoarder,
                                 json={"attachment": True, "size": 10})
        assert attachment.status_code == 201, attachment.text
        fourth = tus_create(client, HOARDER, attachment=True)
        assert fourth.status_code == 429, fourth.text
        assert fourth.json()["type"] == "urn:blobledger:problem:too-many-open-uploads"
        assert tus_create(client, WRITER).status_code == 201  # another token's share
        ended = client.delete(first.headers["Location"],
                              headers={**hoarder, "Tus-Resumable": "1.0.0"})
        assert ended.status_code == 204, ended.text
        assert tus_create(client, HOARDER).status_code == 201
    with sqlite3.connect(server.database) as db:
        owners = {row[0] for row in db.execute("SELECT owner FROM uploads")}
    assert len(owners) == 2, owners  # the hoarder and the writer, each by a digest
    assert all(len(owner) == 16 and int(owner, 16) >= 0 for owner in owners), owners
