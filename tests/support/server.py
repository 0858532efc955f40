"""A real ``blobledger serve`` subprocess on PostgreSQL + Azurite, for HTTP and CLI tests.

Each server gets a fresh PostgreSQL database (migrated by ``serve`` itself at start-up) and
a new Azurite container; its log goes to a temporary file, shown if it fails to start.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from blobledger.db import Database
from blobledger.protocol.models import BlobRow, DocumentRow
from blobledger.stores.azure import AzureStore
from tests.support.services import (
    Azurite,
    create_database,
    drop_database,
    free_port,
    terminate,
)

BLOBLEDGER = Path(sys.executable).parent / "blobledger"


def blobledger_command(*args: str) -> list[str]:
    """The installed ``blobledger`` entry point (``blobledger.cli:run``) with arguments."""
    return [str(BLOBLEDGER), *args]


@dataclass
class Server:
    url: str
    port: int
    env: dict[str, str]
    database_url: str
    container: str
    process: subprocess.Popen[bytes]
    log: Path
    extra: dict[str, str] = field(default_factory=dict)

    def stop(self) -> int:
        return terminate(self.process, 15)


def server_env(database_url: str, container: str, azurite: Azurite,
               **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(
        BLOBLEDGER_DATABASE_URL=database_url,
        BLOBLEDGER_STORE_URL=f"azure://{container}",
        BLOBLEDGER_AZURE_CONNECTION_STRING=azurite.connection_string,
    )
    env.update(extra)  # may override the above (e.g. a file:// store)
    return env


def wait_until_ready(url: str, process: subprocess.Popen[bytes], log: Path,
                     timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"blobledger serve exited ({process.returncode}):\n"
                               + log.read_text(errors="replace")[-3000:])
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"blobledger serve not ready after {timeout}s:\n"
                       + log.read_text(errors="replace")[-3000:])


@contextlib.contextmanager
def running_server(azurite: Azurite, database_url: str, *args: str, port: int | None = None,
                   extra: Mapping[str, str] | None = None) -> Iterator[Server]:
    """``blobledger serve [args]`` on a (free) loopback port, with ``extra`` environment,
    until the block ends (then SIGTERM)."""
    port = port or free_port()
    container = f"srv{uuid.uuid4().hex[:20]}"
    env = server_env(database_url, container, azurite, **(extra or {}))
    with tempfile.TemporaryDirectory(prefix="blobledger-serve-") as folder:
        log = Path(folder) / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                blobledger_command("serve", "--port", str(port), *args), env=env, cwd=folder,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(f"http://127.0.0.1:{port}", port, env, database_url, container,
                        process, log, dict(extra or {}))
        try:
            wait_until_ready(server.url, process, log)
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty PostgreSQL database (dropped afterwards)."""
    from tests.conftest import run_sync

    url = run_sync(create_database())
    try:
        yield url
    finally:
        run_sync(drop_database(url))


@pytest.fixture(scope="module")
def live_service(azurite: Azurite) -> Iterator[Server]:
    """One server per test module (uploads that stall for 2 s are refused: the setting)."""
    with fresh_database() as url, running_server(
            azurite, url, extra={"BLOBLEDGER_BODY_TIMEOUT": "2s"}) as server:
        yield server


async def server_state(server: Server) -> dict[str, list[str]]:
    """The server's document and blob rows (by status) and stored blobs (by tag state)."""
    db = Database(server.database_url)
    store = AzureStore(server.container,
                       connection_string=server.env["BLOBLEDGER_AZURE_CONNECTION_STRING"])
    try:
        async with db.session() as session:
            docs = (await session.execute(select(DocumentRow.status))).scalars().all()
            blobs = (await session.execute(select(BlobRow.state))).scalars().all()
        stored = [(info.tags or {}).get("state", "") async for info in store.list()]
    finally:
        await store.close()
        await db.dispose()
    return {"documents": sorted(docs), "blobs": sorted(blobs), "stored": sorted(stored)}
