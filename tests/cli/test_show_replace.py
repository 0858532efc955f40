"""``blobledger show NAME|ID`` and ``blobledger put --replace``: against a real server
(PostgreSQL + Azurite), and against a small scripted one whose answers are not to be
trusted."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.support.server import Server, blobledger_command
from tests.support.threaded import serving


def cli(*args: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command(*args), env={**env, "BLOBLEDGER_URL": url},
                          cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def one_error(done: subprocess.CompletedProcess[str], code: int = 1) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), lines
    return lines[0]


def test_show_by_name_and_by_id(live_service: Server, tmp_path: Path) -> None:
    (tmp_path / "q1.txt").write_bytes(b"first quarter\n")
    # a longer name that begins with the one looked for is listed after it, never taken
    for name in ("show/q1.txt.bak", "show/q1.txt"):
        assert cli("put", "q1.txt", "--name", name, url=live_service.url,
                   cwd=tmp_path).returncode == 0
    by_name = cli("show", "show/q1.txt", "--json", url=live_service.url, cwd=tmp_path)
    assert by_name.returncode == 0, by_name.stderr
    doc = json.loads(by_name.stdout)
    assert (doc["name"], doc["version"], doc["size"]) == ("show/q1.txt", 1, 14)
    human = cli("show", doc["id"], url=live_service.url, cwd=tmp_path)
    assert human.returncode == 0, human.stderr
    fields = dict(line.split(":", 1) for line in human.stdout.splitlines())
    assert {k: v.strip() for k, v in fields.items()} == {
        "id": doc["id"], "name": "show/q1.txt", "version": "1", "size": "14 bytes",
        "sha256": doc["sha256"], "content type": "text/plain", "state": "ready",
        "created": doc["created_at"], "updated": doc["updated_at"]}
    assert "None" not in human.stdout
    missing = one_error(cli("show", "show/q2.txt", url=live_service.url, cwd=tmp_path))
    assert "no document is named 'show/q2.txt' or has that id" in missing
    assert "no document" in one_error(cli("show", "show/q1", url=live_service.url,
                                          cwd=tmp_path))


def test_put_replace_with_the_version_read(live_service: Server, tmp_path: Path) -> None:
    (tmp_path / "report.txt").write_bytes(b"draft\n")
    created = cli("put", "report.txt", "--name", "replace/report.txt", url=live_service.url,
                  cwd=tmp_path)
    doc = json.loads(created.stdout)
    (tmp_path / "final.txt").write_bytes(b"final version\n")
    replaced = cli("put", "final.txt", "--replace", "--name", "replace/report.txt",
                   url=live_service.url, cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    after = json.loads(replaced.stdout)
    assert (after["id"], after["version"], after["size"]) == (doc["id"], 2, 14)
    content = httpx.get(f"{live_service.url}/documents/{doc['id']}/content")
    assert content.content == b"final version\n"
    # by id, pinned to the version shown: 2 holds, then 2 is stale
    (tmp_path / "v3.txt").write_bytes(b"third\n")
    third = cli("put", "v3.txt", "--replace", "--name", doc["id"], "--if-version", "2",
                url=live_service.url, cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["version"] == 3
    stale = cli("put", "final.txt", "--replace", "--name", "replace/report.txt",
                "--if-version", "2", url=live_service.url, cwd=tmp_path)
    line = one_error(stale)
    assert "'replace/report.txt' is at version 3, not 2" in line and "HTTP 412" in line
    assert httpx.get(f"{live_service.url}/documents/{doc['id']}/content").content == b"third\n"
    # what does not go with --replace is a usage error
    for extra in (["--direct"], ["--retries", "3"], ["--idempotency-key", "k"]):
        refused = cli("put", "final.txt", "--replace", *extra, url=live_service.url,
                      cwd=tmp_path)
        assert extra[0] in one_error(refused, 2)
    assert "--if-version goes with --replace" in one_error(
        cli("put", "final.txt", "--if-version", "1", url=live_service.url, cwd=tmp_path), 2)
    # no document of that name: nothing is created
    missing = cli("put", "final.txt", "--replace", url=live_service.url, cwd=tmp_path)
    assert "no document is named 'final.txt'" in one_error(missing)
    listed = httpx.get(f"{live_service.url}/documents", params={"prefix": "final"}).json()
    assert listed["items"] == []


class Untrusted(ThreadingHTTPServer):
    """Lists nothing; answers every ``GET /documents/{id}`` with ``document``."""

    document: dict[str, object]

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Untrusted

    def do_GET(self) -> None:
        body = {"items": [], "next_cursor": None} if self.path.startswith("/documents?") \
            else self.server.document
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def untrusted() -> Iterator[Untrusted]:
    with serving(Untrusted()) as server:
        yield server


def test_show_distrusts_the_server(untrusted: Untrusted, tmp_path: Path) -> None:
    untrusted.document = {"id": "d1", "name": "evil\x1b]0;owned\x07\u202e.txt", "version": 1,
                          "size": None, "content_type": "text/plain\x1b[31m"}
    shown = cli("show", "d1", url=untrusted.url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\u202e" not in shown.stdout
    assert "name:         evil\\u001b]0;owned\\u0007\\u202e.txt" in shown.stdout
    assert "size:         unknown" in shown.stdout and "sha256:       unknown" in shown.stdout
    assert "None" not in shown.stdout
    assert "\x1b" not in cli("show", "d1", "--json", url=untrusted.url, cwd=tmp_path).stdout
    untrusted.document = {"id": "someone-else", "name": "x", "version": 1}
    line = one_error(cli("show", "d1", url=untrusted.url, cwd=tmp_path))
    assert "answered the document 'someone-else' for the id 'd1'" in line
    untrusted.document = {"id": "d1", "name": "x", "version": "1"}
    line = one_error(cli("show", "d1", url=untrusted.url, cwd=tmp_path))
    assert "not a document" in line
