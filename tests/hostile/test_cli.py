"""The CLI facing careless use: ``get -o`` onto things that are not plain files, names that
display as something else, and an unreachable database (exit 3)."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from blobledger.cli.ls import display_name
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


def test_an_unreachable_database_exits_3(tmp_path: Path) -> None:
    env = clean_env(BLOBLEDGER_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{free_port()}/x",
                    BLOBLEDGER_STORE_URL=f"file://{tmp_path}/store")
    for args in (["sweep", "--once"], ["migrate"], ["serve", "--port", str(free_port())]):
        done = subprocess.run(blobledger_command(*args), env=env, capture_output=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 3, (args, done.stderr)
        lines = done.stderr.decode().splitlines()
        assert len(lines) == 1 and "database unreachable" in lines[0], lines
