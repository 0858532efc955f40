"""The CLI facing careless use: ``get -o`` onto things that are not plain files, names that
display as something else, and an unreachable database (exit 3); and facing a hostile
server (:mod:`tests.hostile.scripted`, a real HTTP server on a loopback socket): escape
sequences in its answers, bodies that are not what they claim, a listing that never ends, a
direct upload target that is not a store's."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from blobledger.cli import main
from blobledger.cli.ls import display_name
from blobledger.stores.local import LocalStore
from tests.hostile.scripted import (
    Hostile,
    Reply,
    Request,
    json_reply,
    problem_reply,
    running,
)
from tests.hostile.support import Served, clean_env, serve
from tests.support.server import blobledger_command
from tests.support.services import free_port
from tests.support.terminal import on_a_terminal

DATA = b"the document's bytes\n" * 100


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve() as served:
        yield served


@pytest.fixture(scope="module")
def doc_id(server: Served) -> str:
    created = httpx.post(f"{server.url}/documents", params={"name": "cli/doc.txt"},
                         content=DATA)
    assert created.status_code == 201
    return str(created.json()["id"])


def cli(server: Served, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(blobledger_command(*args), env=clean_env(BLOBLEDGER_URL=server.url),
                          capture_output=True, timeout=60)


def get(server: Served, doc_id: str, target: Path) -> subprocess.CompletedProcess[bytes]:
    return cli(server, "get", doc_id, "-o", str(target))


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_is_written_to_not_replaced(server: Served, doc_id: str,
                                                   tmp_path: Path) -> None:
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # the same device as /dev/null
    done = get(server, doc_id, null)
    assert done.returncode == 0, done.stderr
    info = os.lstat(null)
    assert stat.S_ISCHR(info.st_mode) and info.st_rdev == os.makedev(1, 3)
    assert [p.name for p in tmp_path.iterdir()] == ["null"]  # no temporary file left


def test_a_fifo_receives_the_bytes_as_a_stream(server: Served, doc_id: str,
                                               tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read)
    reader.start()
    done = get(server, doc_id, fifo)
    reader.join(30)
    assert done.returncode == 0, done.stderr
    assert received == [DATA]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_symbolic_link_is_refused_and_its_target_kept(server: Served, doc_id: str,
                                                        tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_bytes(b"keep me")
    link = tmp_path / "link"
    link.symlink_to(target)
    done = get(server, doc_id, link)
    assert done.returncode == 1
    assert b"symbolic link" in done.stderr and len(done.stderr.splitlines()) == 1
    assert link.is_symlink() and target.read_bytes() == b"keep me"


def test_a_replaced_file_keeps_its_mode_and_hard_links(server: Served, doc_id: str,
                                                       tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_bytes(b"old")
    plain.chmod(0o640)
    assert get(server, doc_id, plain).returncode == 0
    assert plain.read_bytes() == DATA and stat.S_IMODE(plain.stat().st_mode) == 0o640

    linked = tmp_path / "linked.txt"
    linked.write_bytes(b"old")
    other = tmp_path / "other-name.txt"
    os.link(linked, other)
    assert get(server, doc_id, linked).returncode == 0
    assert other.read_bytes() == DATA and linked.stat().st_ino == other.stat().st_ino

    fresh = tmp_path / "fresh.txt"
    assert get(server, doc_id, fresh).returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.txt", "linked.txt",
                                                         "other-name.txt", "plain.txt"]


def test_ls_escapes_names_that_display_as_something_else(server: Served) -> None:
    created = httpx.post(f"{server.url}/documents", params={"name": "invoice.txt"},
                         content=b"x")
    assert created.status_code == 201
    with sqlite3.connect(server.database) as db:  # a name stored before the names rule
        db.execute("UPDATE documents SET name = ? WHERE id = ?",
                   ("invoice\u202etxt.exe", created.json()["id"]))
    done = cli(server, "ls")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert "invoice\\u202etxt.exe" in out and "\u202e" not in out
    assert display_name("a\u200bb\u2028c") == "a\\u200bb\\u2028c"

    # on a terminal: a rich table, the name still escaped and never taken as markup
    shown, drawn = on_a_terminal(
        blobledger_command("ls"), stream="stdout",
        env=clean_env(BLOBLEDGER_URL=server.url, TERM="xterm-256color", COLUMNS="160"))
    assert shown.returncode == 0, shown.stderr
    text = drawn.decode()
    assert "invoice\\u202etxt.exe" in text and "\u202e" not in text
    assert "┃" in text or "│" in text  # drawn as a table


@pytest.mark.slow
def test_an_unreachable_database_exits_3(tmp_path: Path) -> None:
    asyncio.run(LocalStore(tmp_path / "store").prepare())  # a worker creates no store
    env = clean_env(BLOBLEDGER_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/x",
                    BLOBLEDGER_STORE_URL=f"file://{tmp_path}/store")
    for args in (["sweep", "--once"], ["migrate"], ["serve", "--port", str(free_port())]):
        done = subprocess.run(blobledger_command(*args), env=env, capture_output=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 3, (args, done.stderr)
        lines = done.stderr.decode().splitlines()
        assert len(lines) == 1 and "database unreachable" in lines[0], lines


# -- a hostile server ---------------------------------------------------------------------

#: clear the screen, set the window title, write the clipboard (OSC 52), a C1 CSI, a
#: right-to-left override, a zero-width space, a line break
ESCAPES = ("\x1b[2J\x1b[H\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x9b31m"
           "gpj.\u202eexe\u200b\nsecond line")
#: what must never reach the terminal raw
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u200b")
DOC: dict[str, Any] = {"id": "d1", "name": "n.txt", "status": "ready", "version": 1,
                       "size": 1, "content_type": "text/plain", "sha256": None,
                       "blob": "b/1", "created_at": "2026-01-01T00:00:00Z",
                       "updated_at": "2026-01-01T00:00:00Z"}
NOT_A_PROBLEM = "with a body that is not a problem document"


#: the most requests the hostile server answers before it gives up on a CLI that loops
GIVE_UP_AFTER = 50


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    yield from running()


@pytest.fixture
def against(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """The CLI's entry point (what the ``blobledger`` script runs), in this process for
    speed, against a hostile server: its exit code and what it printed. No setting comes
    from the environment or a ``.env`` file."""
    for name in [k for k in os.environ if k.startswith("BLOBLEDGER_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def run(server: Hostile, *args: str) -> Ran:
        capsys.readouterr()
        code = main([*args, "--url", server.url])
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def error_line(done: Ran) -> str:
    """The one error line of a failed command, checked to hold nothing raw."""
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), done.stderr
    assert not any(c in done.stderr for c in RAW), done.stderr
    return lines[0]


def looping(server: Hostile, reply: Reply) -> Reply:
    """``reply``, until the server has answered :data:`GIVE_UP_AFTER` requests: then a
    problem that a test recognises (a CLI that would never stop)."""
    if len(server.requests) > GIVE_UP_AFTER:
        return problem_reply(404, {"detail": "the hostile server gave up"})
    return reply


def test_a_problem_detail_is_printed_escaped(hostile: Hostile, against: Callable[..., Ran],
                                            tmp_path: Path) -> None:
    store_path = "/store/blob"

    def respond(request: Request) -> Reply:
        if request.path == "/uploads":  # put --direct: a target the CLI accepts...
            return json_reply(201, {"id": "u1", "method": "PUT",
                                    "url": f"{hostile.url}{store_path}",
                                    "headers": {"Content-Type": "text/plain"}})
        if request.path == store_path:  # ...whose store refuses with escape sequences
            return Reply(400, ESCAPES.encode(), {"Content-Type": "text/plain"})
        return problem_reply(404, {"type": "urn:blobledger:problem:not-found",
                                   "title": "not found", "status": 404, "detail": ESCAPES})

    hostile.respond = respond
    (tmp_path / "f.txt").write_bytes(b"x")
    for args in (["get", "d1"], ["rm", "d1"], ["ls"], ["put", "f.txt"],
                 ["put", "f.txt", "--direct"]):
        line = error_line(against(hostile, *args))
        assert "\\u001b[2J" in line and "\\u202eexe" in line, (args, line)
        assert "\\u000asecond line" in line or " second line" in line, (args, line)


@pytest.mark.parametrize(("content_type", "body"), [
    ("application/problem+json", b"[1, 2]"),
    ("application/problem+json", b'"a string"'),
    ("application/problem+json", b'{"detail": 5}'),
    ("application/problem+json", b'{"status": "404", "detail": "x"}'),
    ("application/problem+json", b'{"title": ["a"], "type": {}}'),
    ("application/problem+json", b'{"detail": "cut'),
    ("application/problem+json", b"[" * 100_000),
    ("text/html", b"<html>\x1b]0;owned\x07</html>"),
], ids=["list", "string", "detail-number", "status-string", "title-list", "truncated",
        "deep", "html"])
def test_a_body_that_is_not_a_problem_document_is_one_line(
        hostile: Hostile, against: Callable[..., Ran], content_type: str, body: bytes) -> None:
    hostile.respond = lambda request: problem_reply(404, body, content_type)
    line = error_line(against(hostile, "get", "d1"))
    assert line == f"blobledger: error: the server answered 404 {NOT_A_PROBLEM}"


def test_ls_stops_on_a_cursor_it_was_given_before(hostile: Hostile,
                                                  against: Callable[..., Ran]) -> None:
    hostile.respond = lambda request: looping(
        hostile, json_reply(200, {"items": [DOC], "next_cursor": "same"}))
    done = against(hostile, "ls")
    assert "cursor of an earlier page" in error_line(done)
    assert len(hostile.requests) == 2 and len(done.stdout.splitlines()) == 2


def test_ls_stops_after_its_page_limit(hostile: Hostile, against: Callable[..., Ran]) -> None:
    def respond(request: Request) -> Reply:
        return looping(hostile, json_reply(200, {"items": [DOC],
                                                 "next_cursor": f"c{len(hostile.requests)}"}))

    hostile.respond = respond
    done = against(hostile, "ls", "--max-pages", "5")
    assert "stopped after 5 pages" in error_line(done)
    assert len(hostile.requests) == 5 and len(done.stdout.splitlines()) == 5


HOSTILE_IDS = ["a\tb", "c\nd", "e\x1b]0;owned\x07", "\x9b2J", "\u202egnp.exe", "f\x7f\u2028g"]


def test_ls_escapes_every_field_of_every_row(hostile: Hostile,
                                            against: Callable[..., Ran]) -> None:
    items = [{**DOC, "id": value, "name": f"n{i}", "updated_at": f"t\x1b[{i}m"}
             for i, value in enumerate(HOSTILE_IDS)]
    hostile.respond = lambda request: json_reply(200, {"items": items, "next_cursor": None})
    done = against(hostile, "ls")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert len(rows) == len(items), rows
    assert all(len(row.split("\t")) == 5 for row in rows), rows
    assert not any(c in done.stdout for c in RAW), done.stdout
    assert rows[0].startswith("a\\u0009b\t") and rows[1].startswith("c\\u000ad\t")

    as_json = against(hostile, "ls", "--json")
    assert as_json.returncode == 0, as_json.stderr
    lines = as_json.stdout.splitlines()
    assert [json.loads(line)["id"] for line in lines] == HOSTILE_IDS
    assert all(line.isascii() and line.isprintable() for line in lines), lines

    shown, drawn = on_a_terminal(
        blobledger_command("ls", "--url", hostile.url), stream="stdout",
        env=clean_env(TERM="xterm-256color", COLUMNS="200"))
    assert shown.returncode == 0, shown.stderr
    text = drawn.decode("utf-8", errors="replace")
    assert "\\u001b]0;owned\\u0007" in text and "\\u202egnp.exe" in text, text
    for raw in ("\x1b]", "\x07", "\x9b", "\u202e", "\u2028"):  # rich's own SGR may be there
        assert raw not in text, (raw, text)


@pytest.mark.parametrize(("args", "body", "expected"), [
    (["ls"], [], "a page of documents"),
    (["ls"], {"items": "x"}, "a page of documents"),
    (["ls"], {"items": [{"id": 1, "name": "n", "version": 1}]}, "a page of documents"),
    (["ls"], {"items": [{**DOC, "version": "1"}]}, "a page of documents"),
    (["ls"], {"items": [], "next_cursor": 5}, "a page of documents"),
    (["ls"], b"not json", "a page of documents"),
    (["put", "f.txt"], [DOC], "a document"),
    (["put", "f.txt"], {"id": "d1"}, "a document"),
    (["put", "f.txt", "--direct"], {"id": "u1", "method": "PUT"}, "a direct upload's target"),
], ids=["ls-list", "ls-items-string", "ls-id-number", "ls-version-string", "ls-cursor-number",
        "ls-not-json", "put-list", "put-no-version", "direct-no-url"])
def test_a_malformed_answer_is_one_line(hostile: Hostile, against: Callable[..., Ran],
                                        tmp_path: Path, args: list[str], body: object,
                                        expected: str) -> None:
    status = 200 if args[0] == "ls" else 201
    hostile.respond = lambda request: looping(hostile, json_reply(status, body))
    (tmp_path / "f.txt").write_bytes(b"x")
    line = error_line(against(hostile, *args))
    assert f"the server answered {status} with a body that is not {expected} (" in line, line


def _wipe(server: Hostile) -> dict[str, Any]:
    return {"id": "u1", "method": "DELETE",
            "url": f"{server.url}/internal/admin/wipe?confirm=yes",
            "headers": {"Cookie": "session=admin", "X-Admin": "yes"}}


def _put(url: str, **headers: str) -> dict[str, Any]:
    return {"id": "u1", "method": "PUT", "url": url,
            "headers": {"Content-Type": "text/plain", **headers}}


@pytest.mark.parametrize(("make", "reason"), [
    (_wipe, "method 'DELETE', not PUT"),
    (lambda s: _put(f"{s.url}/store/b", Cookie="session=admin"), "header 'Cookie'"),
    (lambda s: _put(f"{s.url}/store/b", Authorization="Bearer stolen"),
     "header 'Authorization'"),
    (lambda s: _put(f"{s.url}/store/b", **{"X-Admin": "yes"}), "header 'X-Admin'"),
    (lambda s: _put(f"{s.url}/store/b", **{"Content-Length": "999"}), "Content-Length"),
    (lambda s: _put(s.url.replace("//", "//admin:pw@") + "/store/b"), "user or a password"),
    (lambda s: _put(s.url.replace("127.0.0.1", "0.0.0.0") + "/store/b"),
     "plain http to '0.0.0.0'"),
    (lambda s: {**_put(f"{s.url}/store/b"), "id": "../internal/admin/wipe?x="},
     "not a direct upload's target"),
], ids=["delete-wipe", "cookie", "authorization", "other-header", "content-length",
        "userinfo", "http-elsewhere", "id-path"])
def test_a_direct_upload_target_not_a_stores_is_refused_and_nothing_sent(
        hostile: Hostile, against: Callable[..., Ran], tmp_path: Path, make: Any,
        reason: str) -> None:
    target = make(hostile)

    def respond(request: Request) -> Reply:
        if request.path == "/uploads":
            return json_reply(201, target)
        return Reply(201, b"{}", {"Content-Type": "application/json"})

    hostile.respond = respond
    (tmp_path / "secret.txt").write_bytes(b"the user's file")
    line = error_line(against(hostile, "put", "secret.txt", "--direct", "--token", "tok"))
    assert reason in line, line
    assert hostile.seen() == [("POST", "/uploads")]  # nothing else was sent


def test_a_direct_upload_sends_only_the_allowed_headers_and_follows_no_redirect(
        hostile: Hostile, against: Callable[..., Ran], tmp_path: Path) -> None:
    """Not following the store's redirect held before; kept as a guard."""

    def respond(request: Request) -> Reply:
        if request.path == "/uploads":
            return json_reply(201, _put(f"{hostile.url}/store/b", **{
                "If-None-Match": "*", "x-ms-blob-type": "BlockBlob"}))
        return Reply(307, b"", {"Location": f"{hostile.url}/internal/admin/wipe"})

    hostile.respond = respond
    (tmp_path / "f.txt").write_bytes(b"the user's file")
    line = error_line(against(hostile, "put", "f.txt", "--direct", "--token", "tok"))
    assert "redirect" in line or "307" in line, line
    assert hostile.seen() == [("POST", "/uploads"), ("PUT", "/store/b")]
    sent = hostile.requests[1]
    assert sent.body == b"the user's file"
    assert "authorization" not in sent.headers and "cookie" not in sent.headers
    assert (sent.headers["if-none-match"], sent.headers["x-ms-blob-type"]) == ("*", "BlockBlob")



def test_a_direct_upload_falls_back_without_uploads_and_gives_up_on_a_failing_store(
        hostile: Hostile, against: Callable[..., Ran], tmp_path: Path) -> None:
    """A server without ``POST /uploads`` (404) gets the ordinary upload, of the whole file;
    a store that keeps answering 503 is given up after the retries, in one line, and the
    upload is not completed."""
    def without(request: Request) -> Reply:
        if request.path == "/uploads":
            return problem_reply(404, {"detail": "Not Found"})
        return json_reply(201, {**DOC, "name": "f.txt"})

    hostile.respond = without
    (tmp_path / "f.txt").write_bytes(b"the user's file")
    done = against(hostile, "put", "f.txt", "--direct")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["id"] == "d1"
    assert [m for m, _ in hostile.seen()] == ["POST", "POST"]
    assert hostile.requests[1].path.startswith("/documents?")
    assert hostile.requests[1].body == b"the user's file"

    hostile.requests.clear()

    def failing(request: Request) -> Reply:
        if request.path == "/uploads":
            return json_reply(201, _put(f"{hostile.url}/store/b"))
        return problem_reply(503, {"detail": "busy"})

    hostile.respond = failing
    line = error_line(against(hostile, "put", "f.txt", "--direct", "--retries", "1"))
    assert line == "blobledger: error: direct upload of f.txt failed: HTTP 503", line
    assert hostile.seen() == [("POST", "/uploads"), ("PUT", "/store/b"), ("PUT", "/store/b")]


def found_as_d1(content: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """A service on which ``get d1`` finds its document as ``show`` would (no document is
    named d1; the id d1 is :data:`DOC`), and whose content answers are ``content``'s."""
    def respond(request: Request) -> Reply:
        if request.path.startswith("/documents?"):
            return json_reply(200, {"items": [], "next_cursor": None})
        if request.path == "/documents/d1":
            return json_reply(200, DOC)
        return content(request)
    return respond


def test_get_refuses_bytes_that_do_not_match_their_digest(
        hostile: Hostile, against: Callable[..., Ran], tmp_path: Path) -> None:
    genuine = base64.b64encode(hashlib.sha256(b"the genuine bytes").digest()).decode()
    hostile.respond = found_as_d1(lambda request: Reply(200, b"forged bytes", {
        "Content-Type": "text/plain", "ETag": '"1"', "Repr-Digest": f"sha-256=:{genuine}:"}))
    target = tmp_path / "kept.txt"
    target.write_bytes(b"keep me")
    line = error_line(against(hostile, "get", "d1", "-o", str(target)))
    assert line.endswith(f"do not match their SHA-256; {target} left unchanged"), line
    assert target.read_bytes() == b"keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]  # no temporary file left
    assert error_line(against(hostile, "get", "d1")) == (
        "blobledger: error: the bytes of d1 do not match their SHA-256")


def test_get_asks_the_service_to_stream_even_where_it_redirects(
        hostile: Hostile, against: Callable[..., Ran], tmp_path: Path) -> None:
    """A service with ``BLOBLEDGER_DOWNLOADS=redirect`` answers 307 unless asked to stream:
    the client asks (``?redirect=false``), since the service's answer carries the SHA-256 it
    checks; a 307 it did not ask for is one error line, never an empty file."""
    digest = base64.b64encode(hashlib.sha256(b"streamed").digest()).decode()

    def respond(request: Request) -> Reply:
        if "redirect=false" in request.path:
            return Reply(200, b"streamed", {"ETag": '"1"',
                                            "Repr-Digest": f"sha-256=:{digest}:"})
        return Reply(307, b"", {"Location": f"{hostile.url}/store/blob"})

    hostile.respond = found_as_d1(respond)
    target = tmp_path / "got.txt"
    done = against(hostile, "get", "d1", "-o", str(target))
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == b"streamed"
    hostile.respond = found_as_d1(
        lambda request: Reply(307, b"", {"Location": f"{hostile.url}/x"}))
    assert "307" in error_line(against(hostile, "get", "d1", "-o", str(tmp_path / "no")))
    assert not (tmp_path / "no").exists()
