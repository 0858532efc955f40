"""Variants under a real SIGKILL at every step of making one (SQLite + disk and PostgreSQL +
Azurite at each step, PostgreSQL + S3 at the storage steps): the dead maker's claim is
``pending`` at most (``attached`` once V4 committed). Then either the sweeper, with the clock
past its cutoff, removes it (nothing is left of the variant but a committed attachment), or
the next request, once the claim's lease lapsed, takes it over and makes the variant itself
(the dead maker's row fenced, its blob removed by the deletion path). The settled invariants
hold either way: no variant blob without its version, no attached variant without its
bytes."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from blobledger.variants import make_variant
from blobledger.workers.invariants import check
from tests.crash.child import Target
from tests.crash.conftest import make_target
from tests.crash.harness import RESOLVE_AT, settle
from tests.support.forkserver import forkserver_context
from tests.variants.child import LEASE, VariantJob, main, variant_ledger
from tests.variants.conftest import stored_variants, variant_rows
from tests.variants.images import png

_CONTEXT = forkserver_context("tests.variants.child")

STEPS = ["variant.after_claim", "variant.after_read", "variant.after_render",
         "put.mid_stream@1", "put.before_commit", "variant.after_upload",
         "variant.after_confirm", "variant.after_tag", "variant.after_attach"]
STORAGE_STEPS = ["put.before_commit", "variant.after_tag"]
CASES = [pytest.param(step, backend, id=f"{step}-{backend}")
         for backend in ("sqlite-local", "postgresql-azure") for step in STEPS] + [
    pytest.param(step, "postgresql-s3", id=f"{step}-postgresql-s3") for step in STORAGE_STEPS]


@pytest.fixture
async def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    return await make_target(backend, tmp_path, request)


async def killed_at(target: Target, step: str) -> str:
    """A ready image, and a maker of its thumbnail SIGKILLed at ``step``; the image's id."""
    async with variant_ledger(target) as ledger:
        doc = await ledger.create("photo.png", png(), content_type="image/png")
    name, _, nth = step.partition("@")
    job = VariantJob(target, f"{name}=kill" + (f"@{nth}" if nth else ""), doc.id)
    process = _CONTEXT.Process(target=main, args=(job,), daemon=True)
    process.start()
    await asyncio.to_thread(process.join, 60)
    if process.exitcode is None:
        process.kill()
        raise AssertionError(f"the maker under {step} hung")
    assert process.exitcode == -signal.SIGKILL, process.exitcode
    return doc.id


@pytest.mark.parametrize(("step", "backend"), CASES)
async def test_killed_then_swept(target: Target, step: str) -> None:
    doc_id = await killed_at(target, step)
    async with variant_ledger(target) as ledger:
        rows = await variant_rows(ledger)
    attached = step == "variant.after_attach"
    assert set(rows.values()) == ({"attached"} if attached else {"pending"})
    async with variant_ledger(target, clock_offset=RESOLVE_AT) as ledger:
        await settle(ledger)
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
        assert await variant_rows(ledger) == (rows if attached else {})
        assert await stored_variants(ledger) == sorted(rows if attached else [])
        again = await make_variant(ledger, doc_id, "thumb")  # found, or made afresh
        assert await stored_variants(ledger) == [again.blob]


@pytest.mark.parametrize("step", ["variant.after_upload", "variant.after_tag"])
@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-s3"])
async def test_killed_then_taken_over(target: Target, step: str) -> None:
    doc_id = await killed_at(target, step)
    async with variant_ledger(target, clock_offset=LEASE + 1) as ledger:
        made = await make_variant(ledger, doc_id, "thumb")  # the lease lapsed: taken over
        rows = await variant_rows(ledger)
        assert rows[made.blob] == "attached" and sorted(rows.values()) == [
            "attached", "deleting"]
    async with variant_ledger(target, clock_offset=RESOLVE_AT) as ledger:
        await settle(ledger)
        assert (await check(ledger, settled=True)).ok
        assert await variant_rows(ledger) == {made.blob: "attached"}
        assert await stored_variants(ledger) == [made.blob]
