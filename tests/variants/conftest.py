"""A ledger with variants configured, on the four backend combinations."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow
from tests.variants.images import VARIANTS


@pytest.fixture
async def ledger(ledger: Ledger) -> Ledger:
    ledger.settings = ledger.settings.with_(variants=VARIANTS, variant_lease=30)
    return ledger


async def variant_rows(ledger: Ledger) -> dict[str, str]:
    """Every variant's blob row: name to state."""
    async with ledger.db.session(readonly=True) as session:
        found = (await session.execute(select(BlobRow.name, BlobRow.state).where(
            BlobRow.owner_column.startswith("variant:")))).all()
    return {name: state for name, state in found}


async def stored_variants(ledger: Ledger) -> list[str]:
    """The variant blobs the store holds."""
    return [info.name async for info in ledger.store.list(
        f"{ledger.settings.blob_prefix}/variants/")]
