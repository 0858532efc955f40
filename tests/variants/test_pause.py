"""A variant maker paused at every step while the sweeper, with the clock past its cutoff,
takes its claim (fenced, then deleted by the deletion path) and ``reconcile --fix`` runs, in
process on SQLite + disk and PostgreSQL + Azurite (and PostgreSQL + S3 at the storage
steps): the maker wakes, loses every later step of its claim (its late upload removed by
itself or by the deletion path), claims afresh and makes the variant; one variant blob is
left, attached, and the settled invariants hold."""

from __future__ import annotations

import asyncio

import pytest

from blobledger.protocol.ledger import Ledger
from blobledger.variants import make_variant
from blobledger.workers.invariants import check
from blobledger.workers.reconciler import reconcile
from blobledger.workers.sweeper import Sweeper
from tests.attachments.test_attach import settle
from tests.support.holds import Holds
from tests.variants.conftest import stored_variants, variant_rows
from tests.variants.images import png

STEPS = ["variant.after_claim", "variant.after_read", "variant.after_render",
         "variant.after_upload", "variant.after_confirm", "variant.after_tag"]
#: each step on SQLite + disk and PostgreSQL + Azurite; the storage steps on S3 too
CASES = [pytest.param(step, backend, id=f"{step}-{backend}")
         for backend in ("sqlite-local", "postgresql-azure") for step in STEPS] + [
    pytest.param(step, "postgresql-s3", id=f"{step}-postgresql-s3")
    for step in ("variant.after_upload", "variant.after_tag")]


@pytest.mark.parametrize(("step", "backend"), CASES)
async def test_paused_while_the_sweeper_takes_the_claim(
        ledger: Ledger, holds: Holds, step: str) -> None:
    doc = await ledger.create("a.png", png(), content_type="image/png")
    holds.at(step)
    paused = asyncio.create_task(make_variant(ledger, doc.id, "thumb"))
    await holds.wait(step)
    (fenced,) = await variant_rows(ledger)
    ledger.clock_offset = ledger.settings.sweep_after + 3600  # it sleeps past the cutoff
    await Sweeper(ledger).run_once()  # fenced (pending -> deleting) and, no grace, deleted
    await Sweeper(ledger).run_once()
    assert fenced not in await variant_rows(ledger)
    fixed = await reconcile(ledger, fix=True, older_than=ledger.settings.sweep_after,
                            blocks=False)
    assert fixed.errors == 0, fixed
    holds.go(step)
    made = await paused  # its claim lost; it claimed afresh
    assert made.blob != fenced
    await settle(ledger)
    assert await variant_rows(ledger) == {made.blob: "attached"}
    assert await stored_variants(ledger) == [made.blob]
    assert (await check(ledger, settled=True)).ok
