"""An abort (S3's AbortMultipartUpload, tus's DELETE) that loses the race to its upload's
completion: the completion made the document first, the abort's compare-and-set finds the
upload no longer open and applies nothing. Whether or not the abort's COMMIT answer comes
back, the abort is told the same (S3: ``NoSuchUpload``; the library: ``IntentLost``), never
a success, and the completed document stays readable. The database connection is cut after
the abort's COMMIT ran (:mod:`tests.support.pgproxy`): PostgreSQL only (SQLite has no
connection to cut). The S3 request is signed as boto3 signs it and sent through the
service's own app in process (``tests.explore.s3writers``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from blobledger import failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import IntentLost
from blobledger.protocol.ledger import Ledger
from blobledger.stores.local import LocalStore
from blobledger.uploads.resumable import Resumable
from tests.explore.s3writers import S3Endpoint, S3Refused, visible
from tests.support.pgproxy import PgProxy

COMMIT = r"^\s*COMMIT"


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


@pytest.fixture
async def ledger(proxy: PgProxy, pg_url: str, tmp_path: Path) -> AsyncIterator[Ledger]:
    url = proxy.url(pg_url)
    store = LocalStore(str(tmp_path / "blobs"))
    async with Ledger(Database(url), store, Settings(database_url=url, store_url=store.url)
                      ) as instance:
        yield instance


async def once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.mark.parametrize("cut", [False, True], ids=["answered", "commit-lost"])
async def test_a_tus_termination_that_lost_to_the_completion(
        ledger: Ledger, proxy: PgProxy, cut: bool) -> None:
    resumable = Resumable(ledger)
    upload = await resumable.create(5, {"name": f"won-{uuid.uuid4().hex}.bin"})
    await resumable.append(upload, 0, once(b"bytes"))
    stale = await resumable.find(upload.id)  # read open, before the completion
    doc = await resumable.complete(stale)
    if cut:
        proxy.arm(COMMIT, "after")
    with pytest.raises(IntentLost):
        await resumable.terminate(stale)
    assert not proxy.armed  # the cut fired (or was never armed)
    assert (await ledger.get(doc.id)).status == "ready"


@pytest.mark.parametrize("cut", [False, True], ids=["answered", "commit-lost"])
async def test_an_s3_abort_that_lost_to_the_completion_is_no_such_upload(
        ledger: Ledger, proxy: PgProxy, cut: bool) -> None:
    s3 = S3Endpoint(ledger, ledger.settings)
    key = f"won-{uuid.uuid4().hex}.bin"  # the database is the session's
    completed: list[str] = []

    async def complete_first(point: str) -> None:
        if point != "multipart.before_abort" or completed:
            return
        completed.append(point)
        await s3.complete(key, upload, [(1, etag)])
        if cut:
            proxy.arm(COMMIT, "after")

    try:
        upload = await s3.create_upload(key)
        etag = await s3.upload_part(key, upload, 1, b"the only part")
        failpoints.set_hook(complete_first)
        with pytest.raises(S3Refused) as refused:
            await s3.abort(key, upload)
    finally:
        failpoints.set_hook(None)
        await s3.close()
    assert completed and not proxy.armed
    assert (refused.value.status, refused.value.code) == (404, "NoSuchUpload")
    doc = await visible(ledger, key)
    assert doc is not None and doc.status == "ready"
    assert b"".join([chunk async for chunk in ledger.read(doc.id)]) == b"the only part"
