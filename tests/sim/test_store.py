"""The simulation's in-memory store passes the conformance suite the real backends pass."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from blobledger.errors import BlobNotFound
from blobledger.stores.s3 import S3Store
from blobledger.testing.conformance import COMMITTED, PENDING, put
from tests.sim.s3 import S3Service, s3_memory_store
from tests.sim.store import AzureMemoryStore, MemoryStore
from tests.stores.contract import StoreContract


class TestMemoryStore(StoreContract):
    @pytest.fixture
    async def store(self) -> MemoryStore:
        return MemoryStore()


class TestAzureMemoryStore(StoreContract):
    @pytest.fixture
    async def store(self) -> AzureMemoryStore:
        return AzureMemoryStore()


class TestS3MemoryStore(StoreContract):
    """The real S3 store over S3's semantics in memory (:mod:`tests.sim.s3`)."""

    @pytest.fixture
    async def store(self) -> S3Store:
        return s3_memory_store(S3Service(clock=lambda: datetime.now(UTC)))


async def test_a_commit_without_if_none_match_fails_the_conformance_check() -> None:
    """The switch the simulation's Azure bug uses is one the conformance suite sees: a
    second commit of a completed upload re-creates the blob ``pending``."""
    store = AzureMemoryStore(create_only_commit=False)
    with pytest.raises(AssertionError):
        await TestAzureMemoryStore().test_a_staged_commit_never_overwrites(store)


async def test_without_its_lock_a_delete_and_a_retag_both_act_on_what_they_read() -> None:
    """The disk's race in memory: a delete that read ``pending`` is stopped between its read
    and its act while a retag conditioned on ``pending`` runs. Under the lock the retag
    waits and then finds no blob; without it the retag acts on what it read (success, for
    the blob the delete then removes)."""
    for flock in (True, False):
        assert await _delete_then_retag(flock) == ("deleted", "not found" if flock else "ok")


async def _delete_then_retag(flock: bool) -> tuple[str, str]:
    checked, go = asyncio.Event(), asyncio.Event()

    async def point(name: str) -> None:
        if name == "delete.after_check":
            checked.set()
            await go.wait()

    store = MemoryStore(point=point, flock=flock)
    await put(store, "b", b"x")
    delete = asyncio.ensure_future(store.delete("b", if_tags=PENDING))
    await checked.wait()
    retag = asyncio.ensure_future(store.set_tags("b", COMMITTED, if_tags=PENDING))
    await asyncio.wait([retag], timeout=0.1)  # under the lock it waits
    go.set()
    deleted, retagged = await asyncio.gather(delete, retag, return_exceptions=True)
    return ("deleted" if deleted is True else repr(deleted),
            "not found" if isinstance(retagged, BlobNotFound) else
            "ok" if retagged is None else repr(retagged))
