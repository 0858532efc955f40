"""The interleaving explorer in the suite, time-bounded: about 30 s on SQLite and local disk
(half with the retag inline, half deferred), 10 s more with documents written only through
the S3 endpoint, and short runs on PostgreSQL with Azurite (deferred) and with moto's S3
(inline) (``scripts/explore --minutes N [--s3]`` runs it longer, under both settings), and
the interleavings of ``scenarios.py`` replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explore.backends import Backend, PostgresAzure, PostgresS3, SqliteLocal
from tests.explore.machine import STATS, explore
from tests.explore.scenarios import SCENARIOS, WRITERS, Scenario, replay
from tests.support.services import Azurite, MotoS3


@pytest.mark.parametrize("retag", ["inline", "deferred"])
def test_interleavings_on_sqlite_and_local_disk(tmp_path: Path, retag: str) -> None:
    examples = STATS.examples
    explore(SqliteLocal(tmp_path), seconds=15, batch=10, retag=retag)
    assert STATS.examples - examples >= 10  # at least one whole batch ran


def test_s3_endpoint_writers_on_sqlite_and_local_disk(tmp_path: Path) -> None:
    """Documents written only through the S3 endpoint (PutObject create, replace,
    ``If-None-Match: *``, DeleteObject), interleaved with the resolvers and uploads."""
    examples = STATS.examples
    explore(SqliteLocal(tmp_path), seconds=10, batch=5, steps=25, s3_only=True)
    assert STATS.examples - examples >= 5


def test_interleavings_on_postgresql_and_azurite(
    tmp_path: Path, pg_url: str, azurite: Azurite
) -> None:
    examples = STATS.examples
    explore(PostgresAzure(tmp_path, azurite, pg_url), seconds=12, batch=3, steps=25,
            retag="deferred")
    assert STATS.examples - examples >= 3


def test_interleavings_on_postgresql_and_s3(tmp_path: Path, pg_url: str, moto: MotoS3) -> None:
    examples = STATS.examples
    explore(PostgresS3(tmp_path, moto, pg_url), seconds=10, batch=2, steps=15)
    assert STATS.examples - examples >= 2


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


@pytest.mark.parametrize(("scenario", "backend"), WRITERS,
                         ids=[f"{s.__name__}-{b}" for s, b in WRITERS])
def test_writers_interleaving(scenario: Scenario, backend: str, tmp_path: Path,
                              request: pytest.FixtureRequest) -> None:
    replay(_backend(backend, tmp_path, request), scenario)


def _backend(name: str, root: Path, request: pytest.FixtureRequest) -> Backend:
    if name == "sqlite-local":
        return SqliteLocal(root)
    pg_url = request.getfixturevalue("pg_url")
    if name == "postgresql-azure":
        return PostgresAzure(root, request.getfixturevalue("azurite"), pg_url)
    return PostgresS3(root, request.getfixturevalue("moto"), pg_url)
