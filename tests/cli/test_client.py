"""``blobledger put/get/ls/rm`` as subprocesses against a real server (PostgreSQL + Azurite)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from blobledger.db import Database
from blobledger.protocol.models import UploadRow
from tests.conftest import run_sync
from tests.support.server import (
    Server,
    blobledger_command,
    fresh_database,
    running_server,
)
from tests.support.services import Azurite, free_port
from tests.support.terminal import on_a_terminal


def cli(*args: str, url: str | None = None, check: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    if url is not None:
        env["BLOBLEDGER_URL"] = url
    done = subprocess.run(blobledger_command(*args), env=env, cwd=cwd, capture_output=True,
                          timeout=120)
    if check:
        assert done.returncode == 0, done.stderr.decode()
    return done


def one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """Assert the command failed with exactly one readable line, and return it."""
    assert done.returncode != 0
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), lines
    return lines[0]


def test_put_get_ls_rm(live_service: Server, tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    source = tmp_path / "report.pdf"
    source.write_bytes(data)
    put = cli("put", str(source), "--name", "cli/report.pdf", url=live_service.url)
    assert put.stderr == b""  # no progress bar when stderr is not a terminal
    doc = json.loads(put.stdout)
    assert (doc["name"], doc["size"], doc["content_type"]) == ("cli/report.pdf", len(data),
                                                               "application/pdf")

    out = tmp_path / "copy.pdf"
    cli("get", doc["id"], "-o", str(out), url=live_service.url)
    assert out.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".part")] == []
    assert cli("get", doc["id"], url=live_service.url).stdout == data

    for i in range(3):
        (tmp_path / f"n{i}").write_bytes(b"%d" % i)
        cli("put", str(tmp_path / f"n{i}"), "--name", f"cli/n{i}", url=live_service.url)
    listed = cli("ls", "--prefix", "cli/", "--page-size", "1", url=live_service.url)
    rows = [line.split("\t") for line in listed.stdout.decode().splitlines()]
    assert [r[-1] for r in rows] == ["cli/n0", "cli/n1", "cli/n2", "cli/report.pdf"]
    assert rows[-1][:3] == [doc["id"], "1", str(len(data))]
    as_json = cli("ls", "--prefix", "cli/n", "--json", url=live_service.url)
    assert [json.loads(line)["name"] for line in as_json.stdout.splitlines()] == [
        "cli/n0", "cli/n1", "cli/n2"]

    stale = cli("rm", doc["id"], "--if-match", "2", url=live_service.url, check=False)
    assert "version 1, not 2" in one_error_line(stale)
    cli("rm", doc["id"], "--if-match", "1", url=live_service.url)
    gone = cli("get", doc["id"], "-o", str(tmp_path / "gone"), url=live_service.url,
               check=False)
    assert "no document is named" in one_error_line(gone)
    assert not (tmp_path / "gone").exists()
    taken = cli("put", str(tmp_path / "n0"), "--name", "cli/n0", url=live_service.url,
                check=False)
    assert "already exists (HTTP 409)" in one_error_line(taken)


def test_get_and_rm_take_a_name_as_show_does(live_service: Server, tmp_path: Path) -> None:
    source = tmp_path / "named.txt"
    source.write_bytes(b"found by name")
    doc = json.loads(cli("put", str(source), "--name", "byname/a.txt",
                         url=live_service.url).stdout)
    assert cli("get", "byname/a.txt", url=live_service.url).stdout == b"found by name"
    stale = cli("rm", "byname/a.txt", "--if-match", "2", url=live_service.url, check=False)
    assert "version 1, not 2" in one_error_line(stale)
    cli("rm", "byname/a.txt", url=live_service.url)
    assert httpx.get(f"{live_service.url}/documents/{doc['id']}").status_code == 404
    missing = cli("rm", "byname/a.txt", url=live_service.url, check=False)
    assert missing.returncode == 1
    assert "no document is named 'byname/a.txt' or has that id" in one_error_line(missing)


def test_errors_are_one_line(live_service: Server, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    assert "cannot read" in one_error_line(cli("put", str(tmp_path / "missing"),
                                               url=live_service.url, check=False))
    assert f"cannot connect to {dead}" in one_error_line(cli("ls", url=dead, check=False))
    assert "--url" in one_error_line(cli("ls", "--url", "ftp://x", check=False))
    (tmp_path / "f").write_bytes(b"x")
    failed = cli("put", str(tmp_path / "f"), "--retries", "1", url=dead, check=False)
    told, error = failed.stderr.decode().splitlines()  # the retry, told; the error
    assert told.startswith(f"blobledger: cannot connect to {dead}") and "retry 1 of 1" in told
    assert failed.returncode == 3 and error.startswith("blobledger: error: ")
    assert "failed after 2 attempts" in error
    bad_name = cli("put", str(tmp_path / "f"), "--name", "../escape", url=live_service.url,
                   check=False)
    assert "(HTTP 400)" in one_error_line(bad_name)
    created = json.loads(cli("put", str(tmp_path / "f"), "--name", "errs/f",
                             url=live_service.url).stdout)
    nowhere = cli("get", created["id"], "-o", str(tmp_path / "no" / "dir"),
                  url=live_service.url, check=False)
    assert "cannot write" in one_error_line(nowhere)


def test_progress_bar_on_a_terminal(live_service: Server, tmp_path: Path) -> None:
    source = tmp_path / "tty.bin"
    source.write_bytes(os.urandom(2 * 1024 * 1024))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")},
           "BLOBLEDGER_URL": live_service.url, "TERM": "xterm-256color", "COLUMNS": "100"}
    done, drawn = on_a_terminal(blobledger_command("put", str(source)), env)
    assert done.returncode == 0
    # rich's bar: the name, the bar, the share, bytes done of the total, the rate
    text = drawn.decode("utf-8", errors="replace")
    assert "tty.bin" in text and "100%" in text and "━" in text, text
    assert "2.0/2.0 MiB" in text and "/s" in text, text
    assert json.loads(done.stdout)["name"] == "tty.bin"


def test_put_waits_for_an_attempt_in_progress(live_service: Server, tmp_path: Path) -> None:
    source = tmp_path / "contended.txt"
    source.write_bytes(b"the bytes of the retry")
    key = "cli-contended-key"
    # an earlier attempt under the same key: half its body sent, its connection still open
    sock = socket.create_connection(("127.0.0.1", live_service.port), timeout=10)
    sock.sendall(b"POST /documents?name=contended.txt HTTP/1.1\r\nHost: localhost\r\n"
                 b"Idempotency-Key: " + key.encode() + b"\r\nContent-Type: text/plain\r\n"
                 b"Content-Length: 100\r\n\r\n"
                 b"the first")
    try:
        time.sleep(0.5)
        put = subprocess.Popen(
            blobledger_command("put", str(source), "--idempotency-key", key,
                               "--url", live_service.url),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(1.5)
        assert put.poll() is None  # still retrying: the first attempt holds the key
    finally:
        sock.close()  # the first attempt fails; its intent is released
    out, err = put.communicate(timeout=60)
    assert put.returncode == 0, err.decode()
    doc = json.loads(out)
    fetched = httpx.get(f"{live_service.url}/documents/{doc['id']}/content")
    assert fetched.content == b"the bytes of the retry"


def test_put_retries_until_the_server_answers(azurite: Azurite, tmp_path: Path) -> None:
    port = free_port()
    source = tmp_path / "early.txt"
    source.write_bytes(b"sent before the server was up")
    put = subprocess.Popen(
        blobledger_command("put", str(source), "--retries", "10",
                           "--url", f"http://127.0.0.1:{port}"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        assert put.poll() is None
        with fresh_database() as url, running_server(azurite, url, port=port) as server:
            out, err = put.communicate(timeout=60)
            assert put.returncode == 0, err.decode()
            listed = httpx.get(f"{server.url}/documents").json()["items"]
            assert [d["id"] for d in listed] == [json.loads(out)["id"]]
    finally:
        if put.poll() is None:
            put.kill()
            put.wait()



@pytest.mark.parametrize("kind", ["local", "azure", "s3"])
def test_put_direct_sends_the_bytes_to_the_store(
        kind: str, azurite: Azurite, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """``put --direct``: POST /uploads, the bytes to the URL it answers, then complete."""
    from tests.api.test_tus_clients import store_env

    moto = request.getfixturevalue("moto") if kind == "s3" else None
    data = os.urandom(1024 * 1024 + 17)
    source = tmp_path / "direct.bin"
    source.write_bytes(data)
    with fresh_database() as url, running_server(
            azurite, url, extra=store_env(kind, tmp_path, moto)) as server:
        done = cli("put", str(source), "--direct", url=server.url)
        doc = json.loads(done.stdout)
        assert doc["name"] == "direct.bin" and doc["size"] == len(data)
        content = httpx.get(f"{server.url}/documents/{doc['id']}/content").content
        assert content == data
        assert run_sync(_uploads(url)) == [("direct", "done", doc["blob"])]


async def _uploads(database_url: str) -> list[tuple[str, str, str]]:
    db = Database(database_url)
    try:
        async with db.session() as session:
            rows = (await session.execute(select(
                UploadRow.mode, UploadRow.state, UploadRow.blob_name))).all()
    finally:
        await db.dispose()
    return [(r.mode, r.state, r.blob_name) for r in rows]
