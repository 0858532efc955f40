"""``blobledger sweep``, ``reconcile`` and ``lifecycle-policy`` end to end, in subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blobledger import Ledger
from blobledger.workers.sweeper import Sweeper, sweep_forever
from tests.support.services import connection_string, free_port
from tests.support.terminal import on_a_terminal as run_on_a_terminal
from tests.sweeper.support import rows, seed_intent, stored

BLOBLEDGER = str(Path(sys.executable).with_name("blobledger"))
pytestmark = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


def env_for(ledger: Ledger, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(BLOBLEDGER_DATABASE_URL=ledger.db.url, BLOBLEDGER_STORE_URL=ledger.store.url,
               BLOBLEDGER_UPLOAD_DEADLINE="60", BLOBLEDGER_SWEEP_AFTER="180",
               BLOBLEDGER_DELETE_GRACE="0")
    env.update(extra)
    return env


def cli(ledger: Ledger, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BLOBLEDGER, *args], env=env_for(ledger, **extra),
                          capture_output=True, text=True, timeout=60, check=False)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("blobledger: error: ") and "Traceback" not in result.stderr
    return lines[0]


async def test_sweep_once_prints_one_summary(ledger: Ledger) -> None:
    await seed_intent(ledger, tag="pending")
    result = cli(ledger, "sweep", "--once", "--batch", "10")
    assert result.returncode == 0, result.stderr
    line, = result.stdout.strip().splitlines()
    summary = json.loads(line)
    assert (summary["event"], summary["swept"], summary["errors"]) == ("sweep", 1, 0)
    assert await rows(ledger) == {}


async def test_a_second_sweeper_on_sqlite_says_so(ledger: Ledger) -> None:
    name = await seed_intent(ledger, tag="pending")
    async with Sweeper(ledger).exclusive():
        result = cli(ledger, "sweep", "--once")
    assert "another sweeper is running" in one_error_line(result)
    assert result.stdout == ""
    assert await rows(ledger) == {name: "pending"}


async def test_sweep_once_runs_beside_serves_background_sweeper(ledger: Ledger) -> None:
    """``serve`` sweeps in the background (on SQLite under the one-sweeper lock): it holds
    the lock for a run only, so an operator's ``sweep --once`` runs between two of its runs
    instead of being refused."""
    name = await seed_intent(ledger, tag="pending")
    stop = asyncio.Event()
    background = asyncio.create_task(sweep_forever(
        ledger, interval=0.2, batch=10, stop=stop, wait_for_lock=True))
    try:
        await asyncio.sleep(0.5)  # a run or two done, the loop between runs
        result = await asyncio.to_thread(cli, ledger, "sweep", "--once")
    finally:
        stop.set()
        await background
    assert result.returncode == 0, result.stderr
    assert await rows(ledger) == {}, name


async def test_unreachable_store_deletes_nothing(ledger: Ledger) -> None:
    name = await seed_intent(ledger, tag="pending")
    result = cli(ledger, "sweep", "--once", BLOBLEDGER_STORE_URL="azure://unreachable",
                 BLOBLEDGER_AZURE_CONNECTION_STRING=connection_string(free_port()))
    assert "unreachable" in one_error_line(result)
    assert await rows(ledger) == {name: "pending"}
    assert name in await stored(ledger)


@pytest.mark.parametrize("args", [["--batch", "0"], ["--interval", "soon"]])
async def test_sweep_bad_input(ledger: Ledger, args: list[str]) -> None:
    one_error_line(cli(ledger, "sweep", *args))


async def test_reconcile_json_and_exit_codes(ledger: Ledger) -> None:
    result = cli(ledger, "reconcile", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["findings_total"] == 0
    orphan = f"{ledger.settings.blob_prefix}/stray"
    from tests.sweeper.support import one
    await ledger.store.put(orphan, one(b"stray"), tags={"state": "pending"})
    result = cli(ledger, "reconcile", "--json")
    assert result.returncode == 1
    finding, summary = (json.loads(line) for line in result.stdout.strip().splitlines())
    assert (finding["category"], finding["name"]) == ("orphan", orphan)
    assert (summary["event"], summary["orphan"]) == ("reconcile", 1)
    doc = await ledger.create("kept.txt", b"kept")
    await ledger.store.delete(doc.blob, if_tags={"state": "committed"})
    result = cli(ledger, "reconcile")
    assert result.returncode == 2
    assert any(line.startswith("missing_ready") for line in result.stdout.splitlines())


async def test_reconcile_refuses_a_cutoff_below_the_deadline(ledger: Ledger) -> None:
    from tests.sweeper.support import one
    orphan = f"{ledger.settings.blob_prefix}/stray"
    await ledger.store.put(orphan, one(b"stray"), tags={"state": "pending"})
    line = one_error_line(cli(ledger, "reconcile", "--fix", "--older-than", "30s"))
    assert "upload deadline" in line
    assert orphan in await stored(ledger)


async def test_lifecycle_policy(ledger: Ledger) -> None:
    result = cli(ledger, "lifecycle-policy", "--container", "docs", "--prefix", "documents",
                 "--prefix", "archive", "--days", "7")
    assert result.returncode == 0, result.stderr
    policy = json.loads(result.stdout)
    assert [r["definition"]["filters"]["blobIndexMatch"] for r in policy["rules"]] == [
        [{"name": "state", "op": "==", "value": "pending"}],
        [{"name": "state", "op": "==", "value": "deleting"}]]
    assert policy["rules"][0]["definition"]["filters"]["prefixMatch"] == [
        "docs/documents/", "docs/archive/"]
    assert "fallback" in result.stderr


@pytest.mark.parametrize("args", [
    ["--days", "0"], ["--days", "1.5"], ["--days", "-3"],
    ["--days", "3", *[a for i in range(11) for a in ("--prefix", f"p{i}")]],
    ["--days", "3", "--hierarchical-namespace"],
    ["--days", "3", "--prefix", "../up"],
])
async def test_lifecycle_policy_bad_input(ledger: Ledger, args: list[str]) -> None:
    result = cli(ledger, "lifecycle-policy", "--container", "docs", *args)
    one_error_line(result)
    assert result.stdout == ""


def on_a_terminal(ledger: Ledger, *args: str) -> tuple[int, str]:
    """Run a command with stderr on a pseudo-terminal; its exit code and what it drew."""
    done, drawn = run_on_a_terminal([BLOBLEDGER, *args],
                                    env_for(ledger, TERM="xterm-256color", COLUMNS="120"))
    return done.returncode, drawn.decode("utf-8", errors="replace")


async def test_reconcile_and_check_draw_progress_on_a_terminal(ledger: Ledger) -> None:
    for i in range(3):
        await ledger.create(f"p{i}.txt", b"x")
    code, drawn = on_a_terminal(ledger, "reconcile")
    assert code == 0, drawn
    assert "reconcile (3 blobs)" in drawn and "3/3" in drawn and "100%" in drawn, drawn
    code, drawn = on_a_terminal(ledger, "check")
    assert code == 0, drawn
    assert "check (3 blobs)" in drawn and "3/3" in drawn, drawn
    # not a terminal: no bar at all
    assert cli(ledger, "reconcile").stderr == ""
