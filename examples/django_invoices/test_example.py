"""The example Django project as it runs: ``manage.py runserver`` in a process of its own, on
SQLite and local disk. It uploads through its form and serves the file; killed (SIGKILL) at
every step of a save, and paused (SIGSTOP) at every step while the sweeper and
``reconcile --fix`` run ahead, it loses no acknowledged file and leaves nothing the sweeper
and the reconciler cannot remove. (On SQLite a save stages inside its row's transaction:
docs/django.md.)"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.services import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
MANAGE = [sys.executable, str(ROOT / "examples" / "django_invoices" / "manage.py")]
PDF = b"%PDF-1.7\n" + b"0123456789" * 30_000
HOUR = 3600
#: every step of a save on SQLite, in order: inside the row's transaction A1, A2, the
#: confirm and A4; after its commit, A3
KILL_POINTS = ["stage.after_insert", "stage.after_upload", "stage.after_confirm",
               "django.after_attach", "django.after_commit", "stage.after_tag"]
#: the points after the commit: a save killed there is committed, and whole
COMMITTED_AT = {"django.after_commit", "stage.after_tag"}
#: pauses: one of each state (staging under the write lock, A4 under it, committed with A3
#: to come); ``BLOBLEDGER_CRASH_MATRIX=all`` pauses at every point
PAUSE_POINTS = KILL_POINTS if os.environ.get("BLOBLEDGER_CRASH_MATRIX") == "all" else [
    "stage.after_upload", "django.after_attach", "django.after_commit"]


def _env(var: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update({"EXAMPLE_VAR": str(var), "PYTHONPATH": str(ROOT), **extra})
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def manage(var: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MANAGE, *args], env=_env(var, **env), capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture
def var(tmp_path: Path) -> Path:
    done = manage(tmp_path, "migrate", "--noinput", "-v", "0")
    assert done.returncode == 0, done.stderr
    return tmp_path


class Server:
    def __init__(self, var: Path, failpoints: str = "") -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [*MANAGE, "runserver", "--noreload", f"127.0.0.1:{self.port}"],
            env=_env(var, **({"BLOBLEDGER_FAILPOINTS": failpoints} if failpoints else {})),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for_port(self.port)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=60)

    def upload(self, number: str) -> httpx.Response:
        page = self.client.get("/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        return self.client.post("/", data={"number": number,
                                           "csrfmiddlewaretoken": token.group(1)},
                                files={"pdf": ("inv.pdf", PDF, "application/pdf")},
                                headers={"Accept": "text/plain"})

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def rows(var: Path) -> dict[str, str]:
    with sqlite3.connect(var / "db.sqlite3") as db:
        return dict(db.execute("SELECT number, pdf FROM invoices_invoice").fetchall())


def blobs(var: Path) -> dict[str, str]:
    with sqlite3.connect(var / "db.sqlite3") as db:
        return dict(db.execute("SELECT name, state FROM blobs").fetchall())


def stored(var: Path) -> set[str]:
    base = var / "blobs" / "blobs"  # the local store keeps its blobs in a folder of its own
    return {str(p.relative_to(base)) for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")} if base.exists() else set()


def settle(var: Path) -> None:
    """The sweeper of a process hours ahead, twice (fence, then the deletion path), then
    ``reconcile --fix`` (orphans of rolled-back or killed transactions, a pending tag under
    an attached row), then the settled invariants and the reconciler, clean."""
    for ahead in (3 * HOUR, 6 * HOUR):
        swept = manage(var, "blobledger_sweep", "--once", BLOBLEDGER_CLOCK_OFFSET=str(ahead))
        assert swept.returncode == 0, swept.stderr
    fixed = manage(var, "blobledger_reconcile", "--fix", BLOBLEDGER_CLOCK_OFFSET=str(6 * HOUR))
    assert fixed.returncode in (0, 1), fixed.stdout + fixed.stderr  # 1: findings, fixed
    checked = manage(var, "blobledger_check", "--settled", "--json",
                     BLOBLEDGER_CLOCK_OFFSET=str(6 * HOUR))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["ok"] is True
    reconciled = manage(var, "blobledger_reconcile", BLOBLEDGER_CLOCK_OFFSET=str(6 * HOUR))
    assert reconciled.returncode == 0, reconciled.stdout + reconciled.stderr


@pytest.mark.slow
def test_upload_list_and_download(var: Path, servers: list[Server]) -> None:
    server = Server(var)
    servers.append(server)
    answer = server.upload("INV-1")
    assert answer.status_code == 201, answer.text
    assert blobs(var)[answer.text] == "attached"
    page = server.client.get("/")
    assert "INV-1" in page.text and f"({len(PDF)} bytes)" in page.text
    link = server.client.get("/invoices/1/pdf")
    assert link.status_code == 302
    download = server.client.get(link.headers["Location"])
    assert download.status_code == 200 and download.content == PDF
    settle(var)
    assert stored(var) == {answer.text}


@pytest.mark.slow
def test_killed_at_every_step_of_a_save(var: Path, servers: list[Server]) -> None:
    acknowledged: dict[str, str] = {}
    for number, point in enumerate(KILL_POINTS):
        server = Server(var, f"{point}=kill")
        servers.append(server)
        with pytest.raises(httpx.TransportError):
            server.upload(f"K-{number}")
        assert server.process.wait(30) == -signal.SIGKILL, point
        healthy = Server(var)
        servers.append(healthy)
        answer = healthy.upload(f"OK-{number}")
        assert answer.status_code == 201, answer.text
        acknowledged[f"OK-{number}"] = answer.text
        healthy.stop()
    settle(var)
    found = rows(var)
    for key, name in acknowledged.items():
        assert found[key] == name and blobs(var)[name] == "attached"
    # a row committed before its process died (after the commit) is whole; no other is left
    assert set(found) - set(acknowledged) == {
        f"K-{KILL_POINTS.index(point)}" for point in COMMITTED_AT}
    assert set(blobs(var)) == set(found.values()) == stored(var)
    assert set(blobs(var).values()) == {"attached"}


@pytest.mark.slow
def test_paused_while_the_sweeper_runs_ahead(var: Path, servers: list[Server]) -> None:
    """Paused at every step, the sweeper and ``reconcile --fix`` of processes hours ahead
    start: inside the row's transaction the server holds SQLite's write lock, so they wait
    for it (they could not see its row); resumed, the save commits, acknowledged, and
    neither removes its file; paused after the commit, the reconciler retags its blob."""
    acknowledged: dict[str, str] = {}
    for number, point in enumerate(PAUSE_POINTS):
        server = Server(var, f"{point}=stop")
        servers.append(server)
        answer: list[httpx.Response | BaseException] = []
        sender = threading.Thread(target=_send, args=(server, f"P-{number}", answer))
        sender.start()
        deadline = time.monotonic() + 30
        while _state(server.process.pid) != "T":
            assert time.monotonic() < deadline, f"never paused at {point}"
            time.sleep(0.05)
        ahead = {"BLOBLEDGER_CLOCK_OFFSET": str(3 * HOUR)}
        workers = [subprocess.Popen([*MANAGE, *command], env=_env(var, **ahead),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for command in (["blobledger_sweep", "--once"],
                                   ["blobledger_reconcile", "--fix"])]
        # both started and reached the database (waiting there if it is locked), or are done
        database = str((var / "db.sqlite3").resolve())
        deadline = time.monotonic() + 60
        while not all(worker.poll() is not None or _opened(worker.pid, database)
                      for worker in workers):
            assert time.monotonic() < deadline, f"the workers never reached the database at {point}"
            time.sleep(0.05)
        os.kill(server.process.pid, signal.SIGCONT)
        sender.join(60)
        assert answer, point
        response = answer[0]
        assert isinstance(response, httpx.Response) and response.status_code == 201, point
        acknowledged[f"P-{number}"] = response.text
        outs = [worker.communicate(timeout=60) for worker in workers]
        assert workers[0].returncode == 0, (point, outs[0])
        assert workers[1].returncode in (0, 1), (point, outs[1])  # 1: a finding, fixed
        server.stop()
        assert stored(var) >= set(acknowledged.values()), point
    settle(var)
    assert rows(var) == acknowledged
    assert blobs(var) == dict.fromkeys(acknowledged.values(), "attached")
    assert stored(var) == set(acknowledged.values())


def _send(server: Server, number: str, answer: list[httpx.Response | BaseException]) -> None:
    try:
        answer.append(server.upload(number))
    except BaseException as exc:
        answer.append(exc)


def _opened(pid: int, path: str) -> bool:
    """Whether the process holds ``path`` open (it reached that database)."""
    try:
        return any(os.readlink(fd) == path for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # a descriptor closed while listed, or the process is gone
        return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"
