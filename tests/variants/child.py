"""The process the variant kill tests SIGKILL: it asks for one variant of a document with
one failpoint armed (``variant.after_*``, or a store's step inside the variant's upload).
Forked from a server that has imported blobledger already."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from blobledger import failpoints
from blobledger.protocol.ledger import Ledger
from blobledger.variants import make_variant
from tests.crash.child import Target
from tests.variants.images import VARIANTS

#: the variant lease in these tests: a later request takes over a dead maker's claim after
LEASE = 20.0


def variant_ledger(target: Target, clock_offset: float = 0.0) -> Ledger:
    ledger = target.ledger(clock_offset=clock_offset)
    ledger.settings = ledger.settings.with_(variants=VARIANTS, variant_lease=LEASE)
    return ledger


@dataclass(frozen=True)
class VariantJob:
    target: Target
    failpoints: str
    doc_id: str
    name: str = "thumb"


async def _run(job: VariantJob) -> None:
    failpoints.configure(job.failpoints)
    async with variant_ledger(job.target) as ledger:
        await make_variant(ledger, job.doc_id, job.name)


def main(job: VariantJob) -> None:
    asyncio.run(_run(job))
    os._exit(0)
