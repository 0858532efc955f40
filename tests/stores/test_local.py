"""The local-disk backend joins the conformance suite, plus what only it can show."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobledger.stores.local import LocalStore
from tests.stores.contract import PENDING, StoreContract, new_name, put


class TestLocalStore(StoreContract):
    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[LocalStore]:
        store = LocalStore(tmp_path / "store")
        async with store:
            yield store


async def test_blob_files_stay_inside_the_root(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    name = new_name()
    await put(store, name, b"inside")
    files = [p for p in (tmp_path).rglob("*") if p.is_file()]
    assert files == [tmp_path / "store" / "blobs" / name]


async def test_leftover_upload_is_reported_and_discarded(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    name = new_name()

    async def dies() -> AsyncIterator[bytes]:
        yield b"x" * 1000
        raise RuntimeError("boom")

    # A crashed process leaves its temp file; simulate by writing one as put would.
    with pytest.raises(RuntimeError):
        await store.put(name, dies(), tags=PENDING)
    assert [u async for u in store.list_uncommitted()] == []  # a live failure cleans up
    leftover = store._upload_path(name)
    leftover.write_bytes(os.urandom(10))
    found = [u async for u in store.list_uncommitted()]
    assert [(u.name, u.blocks, u.size, u.committed) for u in found] == [(name, 1, 10, False)]
    await store.discard_uncommitted(name)
    assert [u async for u in store.list_uncommitted()] == []
