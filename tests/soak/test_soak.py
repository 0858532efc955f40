"""The soak's short form, in the main suite: 12 seconds of load (more until two serve
processes were killed, one every 1.5 to 3 seconds) with kills and faults, on PostgreSQL +
Azurite and on PostgreSQL + S3 (moto's server). ``python -m tests.soak`` runs the long
form."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.soak.run import Storage, azure_storage, s3_storage, soak
from tests.support.server import fresh_database
from tests.support.services import Azurite, MotoS3


async def soak_short(storage: Storage, tmp_path: Path) -> None:
    with fresh_database() as url:
        totals = await soak(storage, url, tmp_path, seconds=12, kill_every=(1.5, 3.0),
                            min_kills=2)
    print(totals.render())
    assert not totals.violations, totals.render()
    assert totals.kills >= 2 and sum(totals.faults.values()) > 0, totals.render()
    assert totals.verified > 0 and totals.verified == totals.documents, totals.render()


@pytest.mark.slow
async def test_soak_short(azurite: Azurite, tmp_path: Path) -> None:
    await soak_short(azure_storage(azurite), tmp_path)


@pytest.mark.slow
async def test_soak_short_on_s3(moto: MotoS3, tmp_path: Path) -> None:
    await soak_short(s3_storage(moto), tmp_path)
