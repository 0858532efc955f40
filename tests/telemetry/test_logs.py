"""``--log-format json``: one JSON line per event, named as the spans."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from blobledger import Ledger, telemetry
from blobledger.db import Database
from blobledger.logs import JsonFormatter
from blobledger.stores.local import LocalStore


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
