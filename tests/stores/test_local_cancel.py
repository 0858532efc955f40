"""A cancelled put on local disk never writes into a descriptor that another upload or reader
got since: the worker thread of a cancelled call is waited for before its descriptor closes.

The disk is real, made slow: one call of ``os.write`` or ``os.setxattr`` on the victim's temp
file stalls (as a slow or busy disk does) while the put around it is cancelled.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from blobledger.errors import BlobNotFound
from blobledger.stores.local import LocalStore
from tests.stores.contract import PENDING, new_name, read_all, stream

STALL = 0.3


class StallOnce:
    """Wraps an ``os`` function taking a descriptor first: its first call on a file whose
    path contains ``marker`` stalls ``STALL`` seconds before doing its work."""

    def __init__(self, real: Callable[..., Any], marker: str) -> None:
        self.real = real
        self.marker = marker
        self.started = threading.Event()
        self.done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, fd: Any, *args: Any) -> Any:
        if isinstance(fd, int) and self._arm(fd):
            time.sleep(STALL)
            try:
                return self.real(fd, *args)
            finally:
                self.done.set()
        return self.real(fd, *args)

    def _arm(self, fd: int) -> bool:
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return False
        with self._lock:
            if self.started.is_set() or self.marker not in path:
                return False
            self.started.set()
            return True

    async def wait_started(self) -> None:
        for _ in range(500):
            if self.started.is_set():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the stalled call never started")

    async def wait_done(self) -> None:
        """Until the stalled call has returned, and a moment for the rest of its thread."""
        assert await asyncio.to_thread(self.done.wait, 5)
        await asyncio.sleep(0.2)


async def cancel_stalled_put(
    store: LocalStore, stall: StallOnce, name: str, data: bytes, tags: dict[str, str]
) -> None:
    """Start a put, cancel it while ``stall`` holds it, and wait until the put has unwound."""
    task = asyncio.create_task(store.put(name, stream(data), tags=tags))
    await stall.wait_started()
    task.cancel()
    await asyncio.wait({task})
    assert task.cancelled()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


async def test_a_cancelled_write_never_lands_in_the_next_upload(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = new_name()
    stall = StallOnce(os.write, quote(victim, safe=""))
    monkeypatch.setattr(os, "write", stall)
    await cancel_stalled_put(store, stall, victim, b"A" * 4096, PENDING)

    name, first, second = new_name(), b"B" * 4096, b"C" * 4096

    async def body() -> AsyncIterator[bytes]:
        yield first
        await stall.wait_done()  # a write still stalled lands now, wherever it lands
        yield second

    digests = await store.put(name, body(), tags=PENDING)
    assert digests.sha256 == hashlib.sha256(first + second).hexdigest()
    assert await read_all(store, name) == first + second  # acknowledged bytes, read back
    with pytest.raises(BlobNotFound):
        await store.stat(victim)
    assert [u async for u in store.list_uncommitted()] == []


async def test_a_cancelled_publish_never_retags_another_blob(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = new_name()
    stall = StallOnce(os.setxattr, quote(victim, safe=""))
    monkeypatch.setattr(os, "setxattr", stall)
    await cancel_stalled_put(store, stall, victim, b"A" * 4096,
                             {"state": "pending", "writer": "a"})

    name, data = new_name(), b"B" * 4096
    tags = {"state": "committed", "writer": "b"}
    await store.put(name, stream(data), tags=tags)
    reader = await store.open(name)  # a download holds a descriptor on the committed blob
    try:
        await stall.wait_done()
        assert b"".join([chunk async for chunk in reader]) == data
    finally:
        await reader.aclose()
    assert await store.get_tags(name) == tags
    assert (await store.stat(name)).sha256 == hashlib.sha256(data).hexdigest()


async def test_a_cancelled_put_still_waits_for_its_thread(
    store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule itself: the cancelled put unwinds only after the stalled call returned."""
    victim = new_name()
    stall = StallOnce(os.write, quote(victim, safe=""))
    monkeypatch.setattr(os, "write", stall)
    started = time.monotonic()
    await cancel_stalled_put(store, stall, victim, b"A" * 4096, PENDING)
    assert stall.done.is_set()
    assert time.monotonic() - started >= STALL * 0.9
    with pytest.raises(BlobNotFound):
        await store.stat(victim)
    assert [u async for u in store.list_uncommitted()] == []
