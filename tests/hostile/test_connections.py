"""Connections from clients that never finish, never leave or send too much: against real
``blobledger serve`` processes over real sockets."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.hostile.support import (
    Served,
    clean_env,
    connect,
    is_closed,
    limit_descriptors,
    read_response,
    serve,
)
from tests.support.server import blobledger_command
from tests.support.services import free_port


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve(env={"BLOBLEDGER_HEADER_TIMEOUT": "2s", "BLOBLEDGER_BODY_TIMEOUT": "30s",
                    "BLOBLEDGER_API_TOKENS": "rw:write"}) as served:
        yield served


def open_idle(port: int, count: int) -> list[socket.socket]:
    return [connect(port) for _ in range(count)]


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


def test_500_idle_connections_leave_healthz_answering() -> None:
    """500 idle connections, half of them with part of a request head, against a process
    allowed 256 descriptors: /healthz answers."""
    with serve(env={"BLOBLEDGER_MAX_CONNECTIONS": "64"}, descriptors=256) as served:
        idle = open_idle(served.port, 500)
        half = open_idle(served.port, 0)
        try:
            for sock in idle[:250]:  # half of them send part of a request head, then nothing
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
                half.append(sock)
            response = httpx.get(f"{served.url}/healthz", timeout=10)
            assert response.status_code == 200 and response.json() == {"status": "ok"}
        finally:
            close_all(idle)
        assert served.process.poll() is None


def test_idle_connections_on_a_small_descriptor_budget() -> None:
    """200 idle connections against a process allowed 128 descriptors: the oldest idle ones
    are closed to make room, and /healthz still answers."""
    env = {"BLOBLEDGER_MAX_CONNECTIONS": "24"}
    with serve(env=env, descriptors=128) as served:
        idle = open_idle(served.port, 200)
        try:
            response = httpx.get(f"{served.url}/healthz", timeout=10)
            assert response.status_code == 200
            evicted = sum(is_closed(sock, 0.01) for sock in idle[:100])
            assert evicted == 100  # the oldest ones made room
        finally:
            close_all(idle)
        assert served.process.poll() is None
        assert "Too many open files" not in served.log_text()


def test_start_up_refuses_a_descriptor_budget_below_the_connection_limit(tmp_path: object) -> None:
    done = subprocess.run(
        blobledger_command("serve", "--port", str(free_port())),
        env=clean_env(BLOBLEDGER_DATABASE_URL="sqlite:///" + str(tmp_path) + "/x.db",
                      BLOBLEDGER_STORE_URL=f"file://{tmp_path}/store"),
        capture_output=True, timeout=60, preexec_fn=limit_descriptors(128))
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "BLOBLEDGER_MAX_CONNECTIONS=1000 needs" in lines[0], lines


def test_half_sent_request_heads_are_closed_with_408(server: Served) -> None:
    heads = open_idle(server.port, 50)
    silent = open_idle(server.port, 20)
    try:
        for sock in heads:
            sock.sendall(b"POST /documents?name=x HTTP/1.1\r\nHost: localhost\r\nContent-Le")
        for sock in heads[:5]:
            buffer = bytearray()
            response = read_response(sock, buffer)  # the header timeout is 2 s
            assert response.status == 408
            assert response.problem()["type"] == "urn:blobledger:problem:header-timeout"
        assert all(is_closed(sock, 10) for sock in heads)
        assert all(is_closed(sock, 10) for sock in silent)  # closed without a response
    finally:
        close_all(heads + silent)


def test_a_head_trickled_byte_by_byte_is_closed(server: Served) -> None:
    sock = connect(server.port)
    stop = threading.Event()

    def trickle() -> None:
        head = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"a" * 1000
        for byte in head:
            if stop.wait(0.2):
                return
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return

    sender = threading.Thread(target=trickle)
    sender.start()
    try:
        assert is_closed(sock, 20)
    finally:
        stop.set()
        sender.join()
        sock.close()


def stalled_upload(port: int, token: str = "rw") -> socket.socket:
    """A connection busy with an upload that has sent 10 of its 100 bytes."""
    sock = connect(port)
    name = uuid.uuid4().hex.encode()
    sock.sendall(b"POST /documents?name=" + name + b" HTTP/1.1\r\nHost: localhost\r\n"
                 b"Authorization: Bearer " + token.encode() + b"\r\n"
                 b"Content-Length: 100\r\n\r\n0123456789")
    return sock


def test_beyond_the_connection_limit_when_all_are_busy_503_with_retry_after() -> None:
    env = {"BLOBLEDGER_MAX_CONNECTIONS": "4", "BLOBLEDGER_BODY_TIMEOUT": "30s"}
    with serve(env=env) as served:
        busy = [stalled_upload(served.port) for _ in range(4)]
        time.sleep(0.5)  # the server has read their heads: they are serving requests
        extra = connect(served.port)
        try:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            response = read_response(extra)
            assert response.status == 503
            assert response.headers["retry-after"] == "1"
            assert response.problem()["type"] == "urn:blobledger:problem:too-many-connections"
        finally:
            close_all([*busy, extra])
        deadline = time.monotonic() + 10
        while httpx.get(f"{served.url}/healthz", timeout=10).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_beyond_the_upload_limit_503_with_retry_after() -> None:
    env = {"BLOBLEDGER_MAX_UPLOADS": "2", "BLOBLEDGER_BODY_TIMEOUT": "30s"}
    with serve(env=env) as served:
        busy = [stalled_upload(served.port) for _ in range(2)]
        try:
            time.sleep(0.5)
            refused = httpx.post(f"{served.url}/documents", params={"name": "third"},
                                 content=b"abc", timeout=10)
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["type"] == "urn:blobledger:problem:too-many-uploads"
            assert httpx.get(f"{served.url}/documents", timeout=10).status_code == 200
        finally:
            close_all(busy)


@pytest.mark.parametrize(("head", "status", "kind"), [
    (b"PUT /documents/0123/content HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer rw\r\n"
     b"Content-Length: 2000\r\n\r\n", 428, "precondition-required"),
])
def test_early_refusals_keep_the_connection_and_arrive_whole(
        server: Served, head: bytes, status: int, kind: str) -> None:
    """An early 4xx to an admitted request with a small unread body: the server reads and
    drops the rest, so the connection carries request after request (and the problem is
    never lost to a reset). A request refused for its token is closed instead:
    ``test_bodies.py``."""
    sock = connect(server.port)
    buffer = bytearray()
    try:
        for _ in range(200):
            sock.sendall(head + b"b" * 2000)
            response = read_response(sock, buffer)
            assert response.status == status
            assert response.problem()["type"] == f"urn:blobledger:problem:{kind}"
            assert response.headers.get("connection") != "close"
    finally:
        sock.close()


def test_an_early_refusal_with_a_large_unread_body_is_read_before_the_close(
        server: Served) -> None:
    """1 MiB the server will not read: ``Connection: close``, and the close waits until the
    response has been sent and the client stops sending (no reset in its way)."""
    body = b"b" * (1024 * 1024)
    for _ in range(100):
        sock = connect(server.port)
        sock.sendall(b"POST /documents?name=x HTTP/1.1\r\nHost: localhost\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")

        def send(sock: socket.socket = sock) -> None:
            with contextlib.suppress(OSError):  # the server may stop reading
                sock.sendall(body)

        sender = threading.Thread(target=send)
        sender.start()
        try:
            response = read_response(sock)
            assert response.status == 401 and response.headers["connection"] == "close"
            assert response.problem()["type"] == "urn:blobledger:problem:unauthorized"
        finally:
            sender.join()
            sock.close()


@pytest.mark.parametrize("request_bytes", [
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Nul: a\x00b\r\n\r\n",
    b"POST /documents?name=x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 12abc\r\n\r\n",
    b"POST /documents?name=x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n"
    b"Content-Length: 2\r\n\r\nab",
    b"GET /a b HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
])
def test_the_parser_refusals_are_problem_documents(server: Served, request_bytes: bytes) -> None:
    sock = connect(server.port)
    try:
        sock.sendall(request_bytes)
        response = read_response(sock)
        assert response.status == 400
        assert response.problem()["type"] == "urn:blobledger:problem:malformed-request"
    finally:
        sock.close()


def test_head_on_healthz_and_documents(server: Served) -> None:
    assert httpx.head(f"{server.url}/healthz").status_code == 200
    listed = httpx.head(f"{server.url}/documents", headers={"Authorization": "Bearer rw"})
    assert listed.status_code == 200 and listed.content == b""


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout() -> None:
    env = {"BLOBLEDGER_KEEP_ALIVE_TIMEOUT": "1s", "BLOBLEDGER_HEADER_TIMEOUT": "60s"}
    with serve(env=env) as served:
        sock = connect(served.port)
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert read_response(sock).status == 200
            assert is_closed(sock, 30)  # long before the 60 s header timeout
        finally:
            sock.close()
