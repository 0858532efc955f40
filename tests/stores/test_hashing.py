"""The stores' shared reading and hashing: ByteReader's blocks (copied or not) and the
Hasher's chunks hashed behind its caller (``feed``), in order, until ``settle``."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator

import pytest

from blobledger.stores import base
from blobledger.stores.base import ByteReader, Hasher

KIB = 1024


async def pieces(*parts: bytes | bytearray) -> AsyncIterator[bytes]:
    for part in parts:
        yield part  # type: ignore[misc]  # a bytearray too: what a careless source yields
        await asyncio.sleep(0)


async def test_read_view_copies_nothing_within_one_bytes() -> None:
    data = bytes(range(256)) * 40  # 10 KiB
    reader = ByteReader(pieces(data))
    first = await reader.read_view(4 * KIB)
    assert isinstance(first, memoryview) and first.obj is data and bytes(first) == data[:4096]
    second = await reader.read_view(4 * KIB)
    assert isinstance(second, memoryview) and bytes(second) == data[4096:8192]
    rest = await reader.read_view(4 * KIB)
    assert bytes(rest) == data[8192:] and await reader.read_view(4 * KIB) == b""


async def test_read_view_gives_a_whole_bytes_itself_and_joins_across_pieces() -> None:
    a, b = b"a" * 3000, b"b" * 3000
    reader = ByteReader(pieces(a, b))
    assert await reader.read_view(3000) is a
    reader = ByteReader(pieces(a, b))
    block = await reader.read_view(4000)
    assert isinstance(block, bytes) and block == a + b[:1000]
    assert await reader.read_view(4000) == b[1000:]


async def test_read_view_copies_a_mutable_piece() -> None:
    """A view of a bytearray could change under the upload and its hashing: copied."""
    piece = bytearray(b"x" * 5000)
    reader = ByteReader(pieces(piece))
    block = await reader.read_view(1000)
    assert isinstance(block, bytes)
    piece[0:1] = b"y"
    assert block == b"x" * 1000


async def test_unread_view_is_read_again() -> None:
    data = b"0123456789" * 1000
    reader = ByteReader(pieces(data))
    head = await reader.read_view(4001)
    reader.unread(head)
    assert bytes(await reader.read_view(4000)) == data[:4000]
    assert await reader.read(100_000) == data[4000:]


def expected(data: bytes) -> tuple[str, str]:
    return hashlib.sha256(data).hexdigest(), hashlib.md5(data).hexdigest()


@pytest.mark.parametrize("size", [100, 300 * KIB])  # hashed on the loop, in a thread
async def test_fed_chunks_are_hashed_in_order(size: int) -> None:
    chunks = [bytes([i]) * size for i in range(9)]
    hasher = Hasher()
    for chunk in chunks[:4]:
        await hasher.feed(chunk, ahead=2)
    await hasher.update(chunks[4])  # after every chunk fed before it
    for chunk in chunks[5:]:
        await hasher.feed(memoryview(chunk))
    with pytest.raises(RuntimeError):
        hasher.digests()  # not settled
    await hasher.settle()
    digests = hasher.digests()
    assert (digests.sha256, digests.md5) == expected(b"".join(chunks))
    assert digests.size == 9 * size


async def test_a_failed_hash_is_raised_at_settle_and_blocks_no_feed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hasher = Hasher()

    def broken(chunk: bytes | memoryview) -> None:
        raise OSError("hash failed")

    monkeypatch.setattr(hasher, "update_sync", broken)
    for _ in range(10):  # more than the queue holds: none waits forever
        await asyncio.wait_for(hasher.feed(b"x" * 10, ahead=1), 5)
    with pytest.raises(OSError, match="hash failed"):
        await hasher.settle()


async def test_abandon_drops_what_was_fed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "HASH_IN_THREAD_ABOVE", 1)
    hasher = Hasher()
    for _ in range(3):
        await hasher.feed(b"y" * 1000, ahead=8)
    await hasher.abandon()
    await hasher.abandon()  # twice: nothing left
    assert hasher._worker is None


async def test_longer_than_reads_ahead_and_consumes_nothing() -> None:
    data = b"z" * 5000
    reader = ByteReader(pieces(data[:2000], data[2000:]))
    assert not await reader.longer_than(5000)
    assert await reader.longer_than(4999)
    assert await reader.read_view(5000) == data
    reader = ByteReader(pieces(data))
    assert await reader.longer_than(1000)
    assert (await reader.read_view(1000)).obj is data  # type: ignore[union-attr]
