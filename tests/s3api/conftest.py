"""A real ``blobledger serve`` with its S3 endpoint, on SQLite with the local disk and on
PostgreSQL with Azurite, and the clients a user would point at it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from blobledger.config import from_env
from blobledger.protocol.ledger import Ledger
from tests.support.server import Server, fresh_database, running_server
from tests.support.services import Azurite

BUCKET = "blobledger"
WRITER = ("AKIDWRITER", "writer-secret-0123456789/+")
READER = ("AKIDREADER", "reader-secret-0123456789")
ADMIN = ("AKIDADMIN", "admin-secret-0123456789")
#: a tenant's key: it creates, reads and writes only the buckets named after it
TENANT = ("AKIDTENANT", "tenant-secret-0123456789")
KEYS = (f"{WRITER[0]}:{WRITER[1]}:write,{READER[0]}:{READER[1]}:read,"
        f"{ADMIN[0]}:{ADMIN[1]}:write+admin,"
        f"{TENANT[0]}:{TENANT[1]}:write+admin@tenant-a@tenant-a-logs")


#: the servers of the S3 endpoint's tests: SQLite with the local disk, PostgreSQL with Azurite
# a sweep beside a running server waits for the server's own sweeper's run to end: on SQLite
# one sweeper runs at a time, and a loaded machine may hold a run for seconds
LOCK_WAIT = 60.0
SERVERS = ["sqlite-local", "postgresql-azure"]


def on(*servers: str) -> pytest.MarkDecorator:
    """A test on some of :data:`SERVERS` only (every one is the default), with a comment
    saying why: what the endpoint decides before the ledger opens a transaction or a store
    call (a signature, a key's scope, a malformed or refused request, a header's form) runs
    on one; a client's use of operations the other tests prove on each runs on one, the
    clients taken in turn."""
    return pytest.mark.parametrize("s3_server", list(servers), indirect=True)


@pytest.fixture(scope="module", params=SERVERS)
def s3_server(request: pytest.FixtureRequest, azurite: Azurite,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # a module's S3_EXTRA: more settings of its servers
    extra = {"BLOBLEDGER_S3API_KEYS": KEYS, **getattr(request.module, "S3_EXTRA", {})}
    with contextlib.ExitStack() as stack:
        if request.param == "sqlite-local":
            folder: Path = tmp_path_factory.mktemp("s3api")
            url = f"sqlite+aiosqlite:///{folder / 'ledger.db'}"
            extra["BLOBLEDGER_STORE_URL"] = f"file://{folder / 'store'}"
        else:
            url = stack.enter_context(fresh_database())
        yield stack.enter_context(running_server(azurite, url, extra=extra))


def client(server: Server, key: tuple[str, str] = WRITER, **config: Any) -> Any:
    """boto3's S3 client at the endpoint, path-style, SigV4, no retries (a refusal shows)."""
    return boto3.client(
        "s3", endpoint_url=f"{server.url}/s3", aws_access_key_id=key[0],
        aws_secret_access_key=key[1], region_name="us-east-1",
        config=Config(**{"s3": {"addressing_style": "path"}, "signature_version": "s3v4",
                         "retries": {"max_attempts": 1, "mode": "standard"}, **config}))


def server_ledger(server: Server, clock_offset: float = 0.0) -> Ledger:
    """A ledger on the server's database and store (its own settings), ``clock_offset``
    seconds ahead: what a sweeper or a reconciler beside it opens."""
    settings = from_env(server.env).with_(clock_offset=clock_offset, failpoints="")
    return Ledger.from_settings(settings, migrate=False)


async def settled(server: Server) -> list[str]:
    """The sweeper (pending intents, then the deletion path) and ``reconcile --fix`` with the
    clock past every cutoff of the server's settings, then the settled invariants checked:
    every blob the store holds."""
    from blobledger.workers.invariants import check
    from blobledger.workers.reconciler import reconcile
    from blobledger.workers.sweeper import Sweeper

    ahead = 10 * 86400.0
    async with server_ledger(server, ahead) as ledger:
        for n in range(3):  # each pass a grace period later: the deletion path's rows due
            ledger.clock_offset = ahead + n * (ledger.settings.delete_grace + 1)
            await Sweeper(ledger, lock_wait=LOCK_WAIT).run_once()
        found = await reconcile(ledger, fix=True, older_than=ledger.settings.upload_deadline)
        assert not (found.missing_ready or found.missing or found.mismatch), found.findings
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
        return [info.name async for info in ledger.store.list(ledger.settings.blob_prefix)]


@pytest.fixture
def s3(s3_server: Server) -> Any:
    return client(s3_server)


@pytest.fixture
def prefix() -> str:
    """A folder of keys of this test's own (the server lives for the module)."""
    return f"t{uuid.uuid4().hex[:8]}/"
