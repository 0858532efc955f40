"""The client commands' retries, against a small real HTTP server scripted per test: what
says retry is retried, after the wait its ``Retry-After`` asks for (seconds or an HTTP
date); a refusal is not."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from blobledger.cli._client import retry_after
from tests.support.server import blobledger_command
from tests.support.threaded import serving

#: a status, its headers (or what makes them when it is sent) and its JSON body
Answer = tuple[int, dict[str, str] | Callable[[], dict[str, str]], dict[str, object]]
DOCUMENT: dict[str, object] = {"id": "d1", "name": "f.txt", "version": 1}


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next of ``answers``; keeps when each one came."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers: list[Answer] = []
        self.arrivals: list[float] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Scripted

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.arrivals.append(time.monotonic())
        status, made, body = self.server.answers.pop(0)
        headers = made() if callable(made) else made
        data = json.dumps(body).encode()
        self.send_response(status)
        content_type = "application/json" if status < 400 else "application/problem+json"
        for name, value in {"Content-Type": content_type, **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with serving(Scripted()) as server:
        yield server


def put(server: Scripted, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "f.txt"
    source.write_bytes(b"bytes")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command("put", str(source), "--url", server.url),
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          check=False)


def problem(kind: str, detail: str) -> dict[str, object]:
    return {"type": f"urn:blobledger:problem:{kind}", "title": kind, "detail": detail}


def test_a_503_is_retried_after_the_http_date_it_gives(scripted: Scripted,
                                                        tmp_path: Path) -> None:
    def two_seconds_ahead() -> dict[str, str]:  # whole seconds: a wait of more than one
        when = datetime.now(UTC) + timedelta(seconds=2)
        return {"Retry-After": format_datetime(when, usegmt=True)}

    scripted.answers = [(503, two_seconds_ahead, problem("unavailable", "busy")),
                        (201, {}, DOCUMENT)]
    done = put(scripted, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == DOCUMENT
    first, second = scripted.arrivals
    assert 0.9 < second - first < 5, second - first  # the backoff alone is ~0.25s


def test_a_503_is_retried_after_the_seconds_it_gives(scripted: Scripted,
                                                      tmp_path: Path) -> None:
    scripted.answers = [(503, {"Retry-After": "1"}, problem("unavailable", "busy")),
                        (201, {}, DOCUMENT)]
    done = put(scripted, tmp_path)
    assert done.returncode == 0, done.stderr
    first, second = scripted.arrivals
    assert 0.95 < second - first < 5, second - first


def test_a_409_is_never_retried(scripted: Scripted, tmp_path: Path) -> None:
    scripted.answers = [(409, {}, problem("name-taken", "f.txt exists")),
                        (201, {}, DOCUMENT)]
    done = put(scripted, tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == "blobledger: error: f.txt exists (HTTP 409)"
    assert len(scripted.arrivals) == 1


def test_a_4xx_without_retry_after_is_final_even_if_retryable_elsewhere(
        scripted: Scripted, tmp_path: Path) -> None:
    scripted.answers = [(429, {}, problem("too-many", "slow down")), (201, {}, DOCUMENT)]
    done = put(scripted, tmp_path)
    assert done.returncode == 1 and len(scripted.arrivals) == 1, done.stderr


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def after(value: str) -> float | None:
        response = httpx.Response(503, headers={"Retry-After": value})
        return retry_after(response, now)

    assert after("7") == 7
    assert after("Fri, 02 Jan 2026 03:04:35 GMT") == 30
    assert after("Fri, 02 Jan 2026 03:00:00 GMT") == 0  # past: at once
    assert after("soon") is None
    assert retry_after(httpx.Response(503)) is None
