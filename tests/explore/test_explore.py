"""The interleaving explorer in the suite, time-bounded: about 45 s on SQLite and local disk
and short runs on PostgreSQL with Azurite and with moto's S3 (``scripts/explore --minutes N``
runs it longer), and the interleavings of ``scenarios.py`` replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explore.backends import PostgresAzure, PostgresS3, SqliteLocal
from tests.explore.machine import STATS, explore
from tests.explore.scenarios import SCENARIOS, Scenario, replay
from tests.support.services import Azurite, MotoS3


def test_interleavings_on_sqlite_and_local_disk(tmp_path: Path) -> None:
    examples = STATS.examples
    explore(SqliteLocal(tmp_path), seconds=45, batch=20)
    assert STATS.examples - examples >= 20  # at least one whole batch ran


def test_interleavings_on_postgresql_and_azurite(
    tmp_path: Path, pg_url: str, azurite: Azurite
) -> None:
    examples = STATS.examples
    explore(PostgresAzure(tmp_path, azurite, pg_url), seconds=20, batch=5)
    assert STATS.examples - examples >= 5


def test_interleavings_on_postgresql_and_s3(tmp_path: Path, pg_url: str, moto: MotoS3) -> None:
    examples = STATS.examples
    explore(PostgresS3(tmp_path, moto, pg_url), seconds=20, batch=5)
    assert STATS.examples - examples >= 5


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_known_interleaving_on_sqlite_and_local_disk(
    scenario: Scenario, tmp_path: Path
) -> None:
    replay(SqliteLocal(tmp_path), scenario)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_known_interleaving_on_postgresql_and_azurite(
    scenario: Scenario, tmp_path: Path, pg_url: str, azurite: Azurite
) -> None:
    replay(PostgresAzure(tmp_path, azurite, pg_url), scenario)
