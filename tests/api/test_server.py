"""Against a real ``blobledger serve`` subprocess on PostgreSQL + Azurite, over real sockets."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time

import httpx

from tests.support.server import Server, live_service, server_state

__all__ = ["live_service"]


def connect(server: Server) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one HTTP/1.1 response with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def problem_body(status: int, headers: dict[str, str], body: bytes, want: int) -> dict[str, str]:
    assert status == want, (status, body)
    assert headers["content-type"] == "application/problem+json"
    return dict(json.loads(body))


async def wait_for_state(server: Server, expected: dict[str, list[str]],
                         within: float = 20.0) -> dict[str, list[str]]:
    deadline = time.monotonic() + within
    while True:
        state = await server_state(server)
        if state == expected or time.monotonic() > deadline:
            return state
        await asyncio.sleep(0.1)


async def test_client_that_drops_the_connection_halfway(live_service: Server) -> None:
    before = await server_state(live_service)
    boundary = "dropboundary"
    cases = {
        "raw": (b"POST /documents?name=dropped-raw HTTP/1.1\r\nHost: localhost\r\n"
                b"Content-Type: application/octet-stream\r\nContent-Length: 4194304\r\n\r\n",
                os.urandom(1024 * 1024)),
        "multipart": (f"POST /documents HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4194304\r\n"
                      f"Content-Type: multipart/form-data; boundary={boundary}\r\n\r\n".encode(),
                      f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'
                      f'dropped-form\r\n--{boundary}\r\nContent-Disposition: form-data; '
                      f'name="file"; filename="f.bin"\r\n\r\n'.encode()
                      + os.urandom(1024 * 1024)),
    }
    for head, half in cases.values():
        sock = connect(live_service)
        sock.sendall(head + half)
        # the intent is recorded (pending) while the bytes stream, and invisible to readers
        state = await wait_for_state(live_service, {
            **before, "documents": sorted([*before["documents"], "pending"]),
            "blobs": sorted([*before["blobs"], "pending"])})
        assert state["documents"].count("pending") == 1, state
        async with httpx.AsyncClient(base_url=live_service.url) as client:
            listed = await client.get("/documents", params={"prefix": "dropped"})
        assert listed.json()["items"] == []
        sock.close()  # half the body sent, then gone
        # the failure path resolves the intent: no row, no blob, and the name is free again
        assert await wait_for_state(live_service, before) == before
    async with httpx.AsyncClient(base_url=live_service.url) as client:
        for name in ("dropped-raw", "dropped-form"):
            again = await client.post("/documents", params={"name": name}, content=b"complete")
            assert again.status_code == 201, again.text


async def test_body_shorter_than_content_length_times_out(live_service: Server) -> None:
    before = await server_state(live_service)
    sock = connect(live_service)
    sock.sendall(b"POST /documents?name=short HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Length: 1000\r\n\r\nonly these bytes")
    status, headers, body = await asyncio.to_thread(read_response, sock)
    sock.close()
    problem = problem_body(status, headers, body, 408)
    assert problem["type"] == "urn:blobledger:problem:body-timeout"
    assert "16 of 1000" in problem["detail"]
    assert headers["connection"] == "close"
    assert await wait_for_state(live_service, before) == before


def test_too_large_by_content_length_before_reading(live_service: Server) -> None:
    sock = connect(live_service)
    sock.sendall(b"POST /documents?name=huge HTTP/1.1\r\nHost: localhost\r\n"
                 b"Content-Length: 6442450944\r\n\r\n")  # 6 GiB announced, not one byte sent
    status, headers, body = read_response(sock)
    sock.close()
    problem = problem_body(status, headers, body, 413)
    assert problem["type"] == "urn:blobledger:problem:upload-too-large"


def test_huge_header(live_service: Server) -> None:
    response = httpx.get(f"{live_service.url}/healthz", headers={"X-Padding": "p" * 30_000})
    assert response.status_code == 431
    assert response.headers["content-type"] == "application/problem+json"
    # past what the HTTP parser buffers (64 KiB) uvicorn may answer a plain 400 itself
    sock = connect(live_service)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: "
                     + b"p" * 200_000 + b"\r\n\r\n")
        status, _, _ = read_response(sock)
        assert status in (400, 431)
    except ConnectionResetError:
        pass  # the server may reset before the client reads its answer
    finally:
        sock.close()
    assert httpx.get(f"{live_service.url}/healthz").status_code == 200


async def test_race_of_fifty_creates(live_service: Server) -> None:
    async with httpx.AsyncClient(base_url=live_service.url, timeout=60) as client:
        responses = await asyncio.gather(*[
            client.post("/documents", params={"name": "raced"}, content=os.urandom(1000))
            for _ in range(50)])
        listed = (await client.get("/documents", params={"prefix": "raced"})).json()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * 49, statuses
    assert {r.json()["type"] for r in responses if r.status_code == 409} == {
        "urn:blobledger:problem:name-taken"}
    assert len(listed["items"]) == 1


def test_round_trip_with_curl_shapes(live_service: Server) -> None:
    # the README's form: file first, name after it (equal to the filename)
    files = {"file": ("x.txt", b"hello\n", "text/plain")}
    created = httpx.post(f"{live_service.url}/documents", files=files, data={"name": "x.txt"})
    assert created.status_code == 201, created.text
    doc = created.json()
    content = httpx.get(f"{live_service.url}/documents/{doc['id']}/content")
    assert content.content == b"hello\n" and content.headers["etag"] == '"1"'
    ranged = httpx.get(f"{live_service.url}/documents/{doc['id']}/content",
                       headers={"Range": "bytes=1-3"})
    assert (ranged.status_code, ranged.content) == (206, b"ell")
    assert httpx.get(f"{live_service.url}/readyz").json() == {"status": "ready"}
    assert httpx.get(f"{live_service.url}/metrics").status_code == 200
