"""The client runs against a real ``blobledger serve``: on SQLite with a store on local disk,
and on PostgreSQL with Azurite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faultproxy import FaultProxy
from tests.support.server import Server, fresh_database, running_server
from tests.support.services import Azurite


@pytest.fixture(scope="module", params=["sqlite-disk", "postgresql-azurite"])
def server(request: pytest.FixtureRequest, azurite: Azurite,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if request.param == "sqlite-disk":
        folder: Path = tmp_path_factory.mktemp("client")
        (folder / "db.sqlite").touch()
        with running_server(azurite, f"sqlite:///{folder / 'db.sqlite'}",
                            extra={"BLOBLEDGER_STORE_URL": f"file://{folder / 'store'}"}) as on:
            yield on
        return
    with fresh_database() as url, running_server(azurite, url) as on:
        yield on


@pytest.fixture
def proxy(server: Server) -> Iterator[FaultProxy]:
    """A fault proxy in front of the server (the client is pointed at it)."""
    running = FaultProxy(server.port).start()
    try:
        yield running
    finally:
        running.stop()
