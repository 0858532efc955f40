"""Fixtures of the crash tests: a fresh target (database + store) per case on each of the four
backend combinations, and the collector that writes ``docs/crash-matrix.md`` when
``BLOBLEDGER_CRASH_MATRIX_DOC`` names the file (``scripts/crash-matrix`` sets it)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from blobledger.db import Database
from blobledger.protocol.migrate import migrate_database
from tests.conftest import database_url, new_container
from tests.crash.child import Target
from tests.crash.matrix_doc import MatrixRows, write_matrix

DOC_ENV = "BLOBLEDGER_CRASH_MATRIX_DOC"


@pytest.fixture(scope="session")
def matrix_rows() -> Iterator[MatrixRows]:
    rows = MatrixRows()
    yield rows
    path = os.environ.get(DOC_ENV)
    if path and (rows.rows or rows.pauses or rows.db_faults):
        write_matrix(Path(path), rows)


async def make_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    """An empty, migrated database and an empty store for one case."""
    db_kind, store_kind = backend.split("-")
    pg = request.getfixturevalue("pg_url") if db_kind == "postgresql" else None
    url = await database_url(db_kind, tmp_path, pg)
    if db_kind == "sqlite":
        db = Database(url)
        await migrate_database(db)
        await db.dispose()
    if store_kind == "local":
        return Target(url, "local", str(tmp_path / "store"))
    if store_kind == "s3":
        moto = request.getfixturevalue("moto")
        return Target(url, "s3", f"c{uuid.uuid4().hex[:20]}", moto.endpoint_url)
    azurite = request.getfixturevalue("azurite")
    return Target(url, "azure", new_container(), azurite.connection_string)
