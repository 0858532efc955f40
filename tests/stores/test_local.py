"""The local-disk backend joins the conformance suite, plus what only it can show."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from blobledger import failpoints
from blobledger.errors import BlobNotFound, ConditionNotMet
from blobledger.stores.local import LocalStore
from tests.stores.contract import (
    COMMITTED,
    PENDING,
    StoreContract,
    new_name,
    put,
    read_all,
)
from tests.support.holds import STEP, Holds


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


def waiting_for_flock(inode: int) -> int:
    """How many ``flock`` requests of this process wait on the file ``inode`` (the kernel
    lists each blocked request in /proc/locks, marked ``->``)."""
    count = 0
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" not in fields or "FLOCK" not in fields:
            continue
        at = fields.index("FLOCK")
        pid, where = fields[at + 3], fields[at + 4]
        count += int(pid) == os.getpid() and int(where.rsplit(":", 1)[1]) == inode
    return count


@pytest.mark.parametrize("slowed", ["delete.after_check", "store.set_tags.after_read"])
async def test_a_retag_and_a_delete_on_pending_take_turns_on_the_blob_s_lock(
        tmp_path: Path, slowed: str) -> None:
    """Schedule: a writer paused after its confirm and the sweeper claimed its intent; the
    writer's retag (``committed``) and the sweeper's delete, both conditioned on ``pending``,
    race in two worker threads. One is slowed at its seam (``slowed``: it read ``pending``
    and has not acted) while the other goes: the blob's ``flock`` makes the other wait (the
    kernel lists it waiting) until the slowed one has acted, and it then reads what that
    left. The delete first: the retag finds no blob. The retag first: the delete is refused
    and the blob stays, ``committed``. Without the lock both read ``pending`` and both
    succeed: the retag reports ``committed`` for a file the delete unlinks, and the writer's
    roll-forward makes a ready document without a file."""
    store = LocalStore(tmp_path / "store")
    name = new_name()
    await put(store, name, b"confirmed, not yet retagged")
    inode = os.stat(tmp_path / "store" / "blobs" / name).st_ino

    async def retag() -> None:
        await store.set_tags(name, COMMITTED, if_tags=PENDING)

    async def delete() -> bool:
        return await store.delete(name, if_tags=PENDING)

    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "delete.after_check": delete, "store.set_tags.after_read": retag}
    other = next(point for point in calls if point != slowed)
    held = Holds()
    held.at(slowed)
    failpoints.set_hook(held.hit)
    try:
        first = asyncio.ensure_future(calls[slowed]())
        await held.wait(slowed)
        second = asyncio.ensure_future(calls[other]())
        async with asyncio.timeout(STEP):  # it waits for the lock, or (no lock) is done
            while not waiting_for_flock(inode):
                done, _ = await asyncio.wait([second], timeout=0.01)
                if done:
                    break
        held.go(slowed)
        results = dict(zip([slowed, other], await asyncio.gather(
            first, second, return_exceptions=True), strict=True))
    finally:
        held.release_all()
        failpoints.set_hook(None)
    retagged, deleted = results["store.set_tags.after_read"], results["delete.after_check"]
    if slowed == "delete.after_check":
        assert deleted is True and isinstance(retagged, BlobNotFound), results
        with pytest.raises(BlobNotFound):
            await store.stat(name)
    else:
        assert retagged is None and isinstance(deleted, ConditionNotMet), results
        assert await store.get_tags(name) == COMMITTED
        assert await read_all(store, name) == b"confirmed, not yet retagged"
