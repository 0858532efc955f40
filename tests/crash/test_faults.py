"""A faulty network between the ledger and Azurite (tests/support/faultproxy.py): each
fault must end as the right outcome: a retry that succeeds, a clear StoreUnavailable, or
(a write applied whose answer was lost) success decided by comparing checksums. Never a
ready document pointing at nothing: the invariant checker runs after every test."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from azure.storage.blob.aio import LinearRetry

from blobledger import Ledger, StoreUnavailable, failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import BlobNotFound, UploadGone
from blobledger.stores.azure import AzureStore
from blobledger.uploads.resumable import Resumable
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.conftest import new_container
from tests.support.faultproxy import FaultProxy, Request
from tests.support.services import Azurite, connection_string
from tests.support.sweeping import sweep_at

SMALL = b"small body " * 100  # one Put Blob
LARGE = bytes(range(256)) * 1024  # 256 KiB: staged (Put Block x4, Put Block List)
FAST_RETRIES = {
    "retry_policy": LinearRetry(backoff=0, retry_total=2, random_jitter_range=0),
    "connection_timeout": 2,
    "read_timeout": 1,
}
#: options the store's own requests (its single put and its retag) keep: the SDK's policy
#: above hands every request to the SDK; with these, those two go as requests of their own
#: (stores/azure/lean.py), retried after the store's own waits
OWN_REQUESTS = {"retry_total": 2, "connection_timeout": 2, "read_timeout": 1}
#: the SDK's attempts at one request under either: the first and two retries
ATTEMPTS = 20


def blob_write(request: Request) -> bool:
    return request.is_blob_write


def put_block(request: Request) -> bool:
    return request.method == "PUT" and request.comp == "block"


def blob_read(request: Request) -> bool:
    return request.method == "GET" and request.comp is None and "/" in request.path[1:]


def tag_write(request: Request) -> bool:
    return request.is_tag_write


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[FaultProxy]:
    with FaultProxy(azurite.port) as running:
        yield running


@pytest.fixture(params=["sdk", "own"])
async def ledger(proxy: FaultProxy, tmp_path: Path, request: pytest.FixtureRequest
                 ) -> AsyncIterator[Ledger]:
    store = AzureStore(new_container(), connection_string=connection_string(proxy.port),
                       single_put_limit=64 * 1024, block_size=64 * 1024,
                       client_options=FAST_RETRIES if request.param == "sdk" else OWN_REQUESTS)
    store._client()
    assert (store._lean is None) == (request.param == "sdk")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as instance:
        yield instance
        proxy.clear()
        report = await check(instance)
        assert report.ok, report.render()


async def read(ledger: Ledger, doc_id: str) -> bytes:
    return b"".join([chunk async for chunk in ledger.read(doc_id)])


async def settle(ledger: Ledger) -> None:
    real = ledger.clock_offset
    ledger.clock_offset = 3600.0
    try:
        await Sweeper(ledger).run_once()
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
    finally:
        ledger.clock_offset = real


@pytest.mark.parametrize("status", [500, 503])
@pytest.mark.parametrize("body", [SMALL, LARGE], ids=["single", "staged"])
async def test_transient_error_status_is_retried(
    ledger: Ledger, proxy: FaultProxy, status: int, body: bytes
) -> None:
    proxy.add(blob_write, f"status:{status}")
    proxy.add(put_block, f"status:{status}")
    doc = await ledger.create("a.bin", body)
    assert await read(ledger, doc.id) == body
    assert proxy.injected["status"] == (1 if body is SMALL else 2)


async def test_persistent_503_is_store_unavailable(ledger: Ledger, proxy: FaultProxy) -> None:
    proxy.add(blob_write, "status:503", times=100)
    with pytest.raises(StoreUnavailable):
        await ledger.create("a.bin", SMALL)
    assert proxy.injected["status"] == 3  # the first try and two retries
    assert [d async for d in ledger.list()] == []
    proxy.clear()
    await settle(ledger)
    doc = await ledger.create("a.bin", SMALL)  # the name is free again
    assert await read(ledger, doc.id) == SMALL


@pytest.mark.parametrize("match", [blob_write, put_block], ids=["put", "block"])
async def test_reset_mid_upload_is_retried(ledger: Ledger, proxy: FaultProxy, match: object
                                           ) -> None:
    proxy.add(match, "reset_request")  # type: ignore[arg-type]
    doc = await ledger.create("a.bin", LARGE if match is put_block else SMALL)
    assert doc.sha256 == hashlib.sha256(LARGE if match is put_block else SMALL).hexdigest()
    assert proxy.injected["reset_request"] == 1


async def test_reset_mid_download_never_returns_wrong_bytes(
    ledger: Ledger, proxy: FaultProxy
) -> None:
    doc = await ledger.create("a.bin", SMALL)
    proxy.add(blob_read, "reset_response")
    try:
        data = await read(ledger, doc.id)
    except StoreUnavailable:
        data = None
    assert data in (SMALL, None)
    assert proxy.injected["reset_response"] == 1
    assert await read(ledger, doc.id) == SMALL


async def test_slow_responses_still_succeed(ledger: Ledger, proxy: FaultProxy) -> None:
    proxy.add(lambda r: True, "slow:0.2", times=3)  # put, retag, download
    doc = await ledger.create("a.bin", SMALL)
    assert await read(ledger, doc.id) == SMALL
    assert proxy.injected["slow"] == 3


async def test_hung_response_times_out_and_is_retried(ledger: Ledger, proxy: FaultProxy
                                                      ) -> None:
    proxy.add(blob_write, "hang")
    doc = await ledger.create("a.bin", SMALL)
    assert await read(ledger, doc.id) == SMALL
    assert proxy.injected["hang"] == 1


async def test_storage_that_never_answers_is_store_unavailable(
    ledger: Ledger, proxy: FaultProxy
) -> None:
    proxy.add(blob_write, "hang", times=100)
    with pytest.raises(StoreUnavailable):
        await ledger.create("a.bin", SMALL)
    assert [d async for d in ledger.list()] == []
    proxy.clear()
    await settle(ledger)


@pytest.mark.parametrize("body", [SMALL, LARGE], ids=["put-blob", "put-block-list"])
async def test_lost_response_of_create_only_put_is_success(
    ledger: Ledger, proxy: FaultProxy, body: bytes
) -> None:
    """The server stored the blob, the answer was lost, the SDK retried the create-only
    put and got 409: the ledger compares checksums and goes on."""
    proxy.add(blob_write, "lost_response")
    doc = await ledger.create("a.bin", body)
    assert await read(ledger, doc.id) == body
    assert proxy.injected["lost_response"] == 1
    names = [i.name async for i in ledger.store.list()]
    assert names == [doc.blob]
    await settle(ledger)


async def test_lost_response_of_tag_update_is_success(ledger: Ledger, proxy: FaultProxy
                                                      ) -> None:
    proxy.add(tag_write, "lost_response")
    doc = await ledger.create("a.bin", SMALL)
    assert (await ledger.store.get_tags(doc.blob)) == {"state": "committed"}
    assert proxy.injected["lost_response"] == 1


async def test_lost_responses_in_the_deletion_path(ledger: Ledger, proxy: FaultProxy) -> None:
    doc = await ledger.create("a.bin", SMALL)
    new = await ledger.replace(doc.id, LARGE, expected_version=1)
    proxy.add(tag_write, "lost_response")
    proxy.add(lambda r: r.method in ("DELETE", "POST"), "lost_response")  # delete or batch
    await settle(ledger)
    assert [i.name async for i in ledger.store.list()] == [new.blob]
    assert proxy.injected["lost_response"] == 2


async def test_a_swept_tus_completion_whose_publication_applied_unanswered_leaves_nothing(
        ledger: Ledger, proxy: FaultProxy) -> None:
    """The sweeper takes a tus upload while its completion is on its way; Azurite applies
    the publication (the block list) all the same, and its answer and every retry's are
    lost: the store says unavailable, the client is told the upload is gone, and the blob
    the publication made (``pending``, its row swept) is removed by the completion itself,
    not left for ``reconcile --fix``."""
    resumable = Resumable(ledger, segment=64 * 1024)
    upload = await resumable.create(len(LARGE), {"name": "swept.bin"})

    async def once() -> AsyncIterator[bytes]:
        yield LARGE

    assert await resumable.append(upload, 0, once()) == len(LARGE)
    sweep, swept = sweep_at(ledger, "staged.before_commit", then=lambda: proxy.add(
        lambda r: r.method == "PUT" and r.comp == "blocklist", "lost_response",
        times=100))  # every attempt, the SDK's retries and the store's

    failpoints.set_hook(sweep)
    try:
        with pytest.raises(UploadGone) as gone:
            await resumable.complete(await resumable.find(upload.id))
    finally:
        failpoints.set_hook(None)
        proxy.clear()
    assert swept == [1] and proxy.injected["lost_response"] >= 3
    assert isinstance(gone.value.__cause__, StoreUnavailable)  # the publication's outcome
    assert await ledger.transitions.find_upload(upload.id) is None
    with pytest.raises(BlobNotFound):
        await ledger.store.stat(upload.blob_name)
