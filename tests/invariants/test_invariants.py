"""The invariant checker finds each kind of break it claims to, on every backend, and the
``blobledger check`` command reports it with the right exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from blobledger import Ledger
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow, DocumentStatus, utcnow
from blobledger.workers.invariants import Violation, check


def invariants(report_violations: list[Violation]) -> list[str]:
    return sorted(v.invariant for v in report_violations)


async def test_clean_ledger_has_no_violations(ledger: Ledger) -> None:
    doc = await ledger.create("a.txt", b"alpha")
    await ledger.replace(doc.id, b"beta", expected_version=1)
    await ledger.create("b.txt", b"gamma")
    report = await check(ledger)
    assert report.ok, report.render()
    assert report.ready_documents == 2
    assert report.blob_rows == {"committed": 2, "deleting": 1}
    assert report.stored_blobs == 3


async def test_missing_blob_wrong_tag_and_wrong_checksum_break_i1(ledger: Ledger) -> None:
    gone = await ledger.create("gone.txt", b"one")
    retagged = await ledger.create("retagged.txt", b"two")
    altered = await ledger.create("altered.txt", b"three")
    await ledger.store.delete(gone.blob, if_tags={"state": "committed"})
    await ledger.store.set_tags(retagged.blob, {"state": "pending"})
    async with ledger.db.session() as session:
        await session.execute(update(DocumentRow).where(DocumentRow.id == altered.id)
                              .values(sha256="0" * 64))
    report = await check(ledger)
    found = {v.subject: v.detail for v in report.violations}
    assert invariants(report.violations) == ["I1", "I1", "I1"]
    assert "missing" in found[f"document {gone.id}"]
    assert "state=pending" in found[f"document {retagged.id}"]
    assert "SHA-256" in found[f"document {altered.id}"]


async def test_settled_finds_orphans_and_stale_rows(ledger: Ledger) -> None:
    doc = await ledger.create("old.txt", b"old")
    await ledger.replace(doc.id, b"new", expected_version=1)  # old row: deleting
    async with ledger.db.session() as session:  # a pending intent left by a crash
        await session.execute(update(BlobRow).where(BlobRow.name == doc.blob)
                              .values(changed_at=utcnow() - timedelta(days=1)))
    await ledger.store.put("documents/" + "f" * 32, _one(b"stray"), tags={"state": "pending"})
    live = await check(ledger)
    assert live.ok, live.render()  # not settled: orphans and old rows are only counted
    assert live.orphan_blobs == 1
    settled = await check(ledger, settled=True)
    details = sorted(v.detail for v in settled.violations)
    assert invariants(settled.violations) == ["I4", "I4"]
    assert "no row" in details[1] and "stale deleting" in details[0]


async def test_pending_documents_are_counted_and_stay_hidden(ledger: Ledger) -> None:
    doc = await ledger.create("p.txt", b"p")
    async with ledger.db.session() as session:  # as if C4 had not happened yet
        await session.execute(update(DocumentRow).where(DocumentRow.id == doc.id)
                              .values(status=DocumentStatus.PENDING))
    report = await check(ledger)
    assert report.pending_documents == 1
    assert report.ok  # the ledger hides it: I5 holds
    assert report.blob_rows == {BlobState.COMMITTED.value: 1}


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.mark.slow
def test_cli_check_exit_status_and_json(tmp_path: Path) -> None:
    env = {**os.environ, "BLOBLEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
           "BLOBLEDGER_STORE_URL": f"file://{tmp_path / 'store'}"}
    cli = [sys.executable, "-c", "from blobledger.cli import run; run()"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], env=env, capture_output=True, text=True,
                              timeout=60, check=False)

    (tmp_path / "db.sqlite").touch()  # a database file with no tables
    (tmp_path / "store" / "blobs").mkdir(parents=True)
    unmigrated = run("check")
    assert unmigrated.returncode == 2
    assert unmigrated.stderr.startswith("blobledger: error: database error on sqlite:///")
    assert len(unmigrated.stderr.strip().splitlines()) == 1
    assert run("migrate").returncode == 0
    clean = run("check")
    assert clean.returncode == 0, clean.stderr
    assert "no violations" in clean.stdout
    script = ("import asyncio, os\nfrom blobledger import Ledger\n"
              "async def main():\n"
              "    async with Ledger.from_env() as ledger:\n"
              "        doc = await ledger.create('a.txt', b'hello')\n"
              "        await ledger.store.delete(doc.blob, if_tags={'state': 'committed'})\n"
              "asyncio.run(main())\n")
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=60)
    broken = run("check", "--json")
    assert broken.returncode == 1
    data = json.loads(broken.stdout)
    assert data["ok"] is False and data["violations"][0]["invariant"] == "I1"
    bad = subprocess.run([*cli, "check"], env={**env, "BLOBLEDGER_STORE_URL": "ftp://x"},
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "blobledger: error: unsupported store URL 'ftp://x': use file:///path, "
        "azure://<container> or s3://bucket[/prefix]"]
