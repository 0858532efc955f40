"""The soak's short form, in the main suite: 35 seconds of load with kills and faults."""

from __future__ import annotations

from pathlib import Path

from tests.soak.run import soak
from tests.support.server import fresh_database
from tests.support.services import Azurite


async def test_soak_short(azurite: Azurite, tmp_path: Path) -> None:
    with fresh_database() as url:
        totals = await soak(azurite, url, tmp_path, seconds=35)
    print(totals.render())
    assert not totals.violations, totals.render()
    assert totals.kills >= 3 and sum(totals.faults.values()) > 0, totals.render()
    assert totals.verified > 0 and totals.verified == totals.documents, totals.render()
