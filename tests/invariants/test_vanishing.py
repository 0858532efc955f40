"""Uncommitted bytes that vanish while ``reconcile`` or ``check`` scans them (a sweeper
dropping an upload's parts, a tus termination): the name listed a moment earlier is skipped,
not counted, and the run still produces its report. Each backend's scan is held, for real,
between its listing and the per-name call (``scan.uncommitted``), the bytes are dropped with
the store's own call, and the scan goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from blobledger import Ledger
from blobledger._base.names import new_blob_name
from blobledger.protocol.models import PENDING_TAG
from blobledger.workers.invariants import check
from blobledger.workers.reconciler import Finding, reconcile
from tests.support.holds import Holds

POINT = "scan.uncommitted"
T = TypeVar("T")


async def staged(ledger: Ledger, name: str) -> str:
    """Uncommitted bytes under ``name`` (one part of a staged upload); the upload's handle."""
    handle = await ledger.store.begin_staged(name, tags=PENDING_TAG)
    await ledger.store.stage(name, handle, 1, b"part of an upload " * 64)
    return handle


async def scanned_while_one_vanishes(
        ledger: Ledger, holds: Holds, run: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Two names with uncommitted bytes; the scan is held at the first name it reached, whose
    bytes are then dropped; the run's result."""
    prefix = ledger.settings.blob_prefix
    first, second = sorted(new_blob_name(prefix, f"{i}.bin") for i in range(2))
    handles = {name: await staged(ledger, name) for name in (first, second)}
    holds.at(POINT)
    task = asyncio.create_task(run())
    try:
        await holds.wait(POINT)
        await ledger.store.abort_staged(first, handles[first])
    finally:
        holds.release_all()
    try:
        return await task
    finally:
        await ledger.store.abort_staged(second, handles[second])


async def test_reconcile_skips_uncommitted_bytes_that_vanish(ledger: Ledger,
                                                             holds: Holds) -> None:
    findings: list[Finding] = []
    report = await scanned_while_one_vanishes(ledger, holds, lambda: reconcile(
        ledger, fix=False, older_than=ledger.settings.upload_deadline,
        on_finding=findings.append))
    assert report.uncommitted + report.in_flight == 1, report
    assert report.errors == 0 and len(findings) == report.uncommitted


async def test_check_skips_uncommitted_bytes_that_vanish(ledger: Ledger, holds: Holds) -> None:
    report = await scanned_while_one_vanishes(ledger, holds, lambda: check(ledger))
    assert report.uncommitted == 1 and report.ok, report
