"""``--log-format json``: one JSON line per event, named as the spans."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from blobledger import Ledger, telemetry
from blobledger._base.jsonlog import JsonFormatter
from blobledger.db import Database
from blobledger.stores.local import LocalStore
from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import free_port


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    events = logging.getLogger("blobledger.events")
    events.addHandler(handler)
    events.setLevel(logging.INFO)
    telemetry.log_events(True)
    yield out
    telemetry.log_events(False)
    events.removeHandler(handler)
    events.setLevel(logging.NOTSET)


async def test_a_create_logs_one_json_line_per_step(lines: io.StringIO, tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/logs.db")
    async with Ledger(db, LocalStore(str(tmp_path / "blobs"))) as ledger:
        doc = await ledger.create("logged.txt", b"bytes")
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert [r["event"] for r in records] == [
        "begin_create", "upload", "confirm", "tag_committed", "commit_create", "create"]
    for record in records:
        assert record["blobledger.document_id"] == doc.id
        assert record["blobledger.outcome"] == "ok"
        assert record["level"] == "info" and record["duration_ms"] >= 0
    assert records[1]["blobledger.step"] == "C2"


def test_the_formatter_keeps_extra_fields_and_one_line() -> None:
    record = logging.LogRecord("blobledger.sweeper", logging.WARNING, __file__, 1,
                               "sweep stopped:\n%s", ("store unreachable",), None)
    record.event = "sweep.batch"
    record.rows = 3
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert (parsed["event"], parsed["rows"], parsed["level"]) == ("sweep.batch", 3, "warning")


def test_a_json_summary_is_merged_not_quoted() -> None:
    record = logging.LogRecord("blobledger.sweeper", logging.INFO, __file__, 1, "%s",
                               ('{"event": "sweep", "swept": 2}',), None)
    parsed = json.loads(JsonFormatter().format(record))
    assert (parsed["event"], parsed["swept"], parsed["logger"]) == (
        "sweep", 2, "blobledger.sweeper")


def test_serve_logs_every_line_as_json(tmp_path: Path) -> None:
    """uvicorn's start-up and access lines, ours and the ``serving on`` line: all JSON."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    with (tmp_path / "out").open("wb") as out, (tmp_path / "err").open("wb") as err:
        process = subprocess.Popen(
            blobledger_command("--log-format", "json", "--log-level", "info", "serve",
                               "--port", str(port)),
            env=env, cwd=tmp_path, stdout=out, stderr=err)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(url, process, tmp_path / "err")
        created = httpx.post(f"{url}/documents", files={"file": ("x", b"hello\n")},
                             data={"name": "x"})
        assert created.status_code == 201, created.text
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    lines = [line for name in ("out", "err")
             for line in (tmp_path / name).read_text().splitlines()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "event", "message"} <= set(r) for r in records)
    by_logger = {r["logger"] for r in records}
    assert {"uvicorn.error", "uvicorn.access", "blobledger.events"} <= by_logger, by_logger
    started, = (r for r in records if r["event"] == "serve.start")
    assert started["url"] == url and started["database"].startswith("sqlite")
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert {"POST", "GET"} <= {r["http.method"] for r in access}
    assert any(r["http.method"] == "POST" and r["http.status"] == 201 for r in access)
    assert any(r["event"] == "create" and r["blobledger.outcome"] == "ok" for r in records)
