"""``blobledger put --hold`` and ``blobledger show`` of a held or rejected document, against
a real ``serve`` (PostgreSQL + Azurite) whose processors run in ``blobledger sweep --once``."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_show_replace import cli, one_error
from tests.held.conftest import PDF, PNG
from tests.support.server import Server, blobledger_command, fresh_database, running_server
from tests.support.services import Azurite


@pytest.fixture(scope="module")
def held_service(azurite: Azurite) -> Iterator[Server]:
    """A server holding documents for the content-type check, whose own worker runs once at
    start and then not for an hour: the tests decide when processing happens."""
    with fresh_database() as url, running_server(azurite, url, extra={
            "BLOBLEDGER_PROCESSORS": "content-type",
            "BLOBLEDGER_PROCESSING_INTERVAL": "1h"}) as server:
        yield server


def process(server: Server, cwd: Path) -> dict[str, object]:
    """One ``blobledger sweep --once`` on the server's database and store: its processing
    line."""
    done = subprocess.run(blobledger_command("sweep", "--once"), env=server.env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return next(line for line in lines if line["event"] == "processing")


@pytest.mark.slow
def test_put_hold_then_show_held_ready_and_rejected(held_service: Server,
                                                     tmp_path: Path) -> None:
    (tmp_path / "photo.png").write_bytes(PNG)
    (tmp_path / "fake.png").write_bytes(PDF)
    url = held_service.url

    put = cli("put", "photo.png", "--hold", url=url, cwd=tmp_path)
    assert put.returncode == 0, put.stderr
    doc = json.loads(put.stdout)
    assert doc["status"] == "held" and doc["content_type"] == "image/png"
    [told] = put.stderr.splitlines()
    assert told.startswith("held: photo.png is readable by nobody") and doc["id"] in told
    # its writer (without tokens, every caller) is told its state by its id (readers are
    # told nothing: tests/held/test_api.py)
    shown = cli("show", doc["id"], url=url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = dict(line.split(":", 1) for line in shown.stdout.splitlines())
    assert lines["state"].strip() == "held"
    assert lines["processors"].strip() == "content-type pending"

    fake = json.loads(cli("put", "fake.png", "--hold", url=url, cwd=tmp_path).stdout)
    ran = process(held_service, tmp_path)
    assert (ran["ready"], ran["rejected"]) == (1, 1)

    ready = cli("show", doc["id"], url=url, cwd=tmp_path)
    assert ready.returncode == 0 and "state:        ready" in ready.stdout
    assert "processors" not in ready.stdout
    line = one_error(cli("show", fake["id"], url=url, cwd=tmp_path))
    assert "rejected" in line and "declared image/png, but the bytes are" in line
    assert "(HTTP 410)" in line

    # --hold goes through the service's own upload
    refused = cli("put", "photo.png", "--hold", "--direct", url=url, cwd=tmp_path)
    assert refused.returncode == 2 and "--hold" in refused.stderr
