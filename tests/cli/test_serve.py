"""``blobledger serve``: the embedded default a newcomer gets, and the refusals at start-up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import httpx

from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import free_port


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(extra)
    return env


def refused(*args: str, cwd: Path, **env: str) -> str:
    """Run ``serve`` expecting it to refuse: one line on stderr, a non-zero exit."""
    done = subprocess.run(blobledger_command("serve", *args), env=clean_env(**env), cwd=cwd,
                          capture_output=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), lines
    return lines[0]


def test_serves_the_embedded_default_under_var(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(blobledger_command("serve", "--port", str(port)),
                                   env=clean_env(), cwd=tmp_path, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, process, log)
        # what `curl -F file=@x -F name=x $url/documents` sends: the file part first
        created = httpx.post(f"{url}/documents", files={"file": ("x", b"hello\n")},
                             data={"name": "x"})
        assert created.status_code == 201, created.text
        doc_id = created.json()["id"]
        assert httpx.get(f"{url}/documents/{doc_id}/content").content == b"hello\n"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0  # a graceful stop
    assert (tmp_path / "var" / "blobledger.db").is_file()
    assert [p for p in (tmp_path / "var" / "blobs").rglob("*") if p.is_file()]


def test_sweep_after_not_past_the_deadline_is_one_line(tmp_path: Path) -> None:
    line = refused("--port", str(free_port()), cwd=tmp_path,
                   BLOBLEDGER_UPLOAD_DEADLINE="2h", BLOBLEDGER_SWEEP_AFTER="2h")
    assert "BLOBLEDGER_SWEEP_AFTER (2h) must exceed BLOBLEDGER_UPLOAD_DEADLINE (2h)" in line
    assert not (tmp_path / "var").exists()  # refused before anything was created


def test_non_loopback_needs_tokens_or_an_explicit_flag(tmp_path: Path) -> None:
    line = refused("--host", "0.0.0.0", "--port", str(free_port()), cwd=tmp_path)
    assert "BLOBLEDGER_API_TOKENS" in line and "--allow-unauthenticated" in line


def test_unreachable_database_is_one_line(tmp_path: Path) -> None:
    line = refused("--port", str(free_port()), cwd=tmp_path,
                   BLOBLEDGER_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/x")
    assert "database unreachable" in line


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = refused("--port", str(port), cwd=tmp_path)
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line
    assert "--port" in line  # what to do about it
