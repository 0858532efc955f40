"""The store conformance suite: a backend joins by subclassing and supplying ``store``.

    class TestLocalStore(StoreContract):
        @pytest.fixture
        async def store(self, tmp_path): ...

``big`` is a size above the backend's single-put limit, so staged uploads are exercised.
Every case runs for every backend: where ``store.capabilities`` says the service lacks a
guarantee, the case asserts the weaker property that must still hold, never skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    ConditionNotMet,
    IntegrityError,
    InvalidName,
    StoreError,
)
from blobledger.stores.base import Store

PENDING = {"state": "pending"}
COMMITTED = {"state": "committed"}
HOSTILE = ["", "../etc/passwd", "a/../../b", "/abs", "a//b", "a/./b", "a\\b", "a\x00b",
           "a\nb", ".hidden", "x" * 1100, "a/ b", "ünï"]


def new_name(ext: str = ".bin") -> str:
    return f"t/{uuid.uuid4().hex}{ext}"


async def stream(data: bytes, piece: int = 65536) -> AsyncIterator[bytes]:
    for start in range(0, len(data), piece):
        yield data[start : start + piece]
        await asyncio.sleep(0)


async def read_all(store: Store, name: str, start: int = 0, length: int | None = None) -> bytes:
    reader = await store.open(name, start, length)
    try:
        return b"".join([chunk async for chunk in reader])
    finally:
        await reader.aclose()


async def put(store: Store, name: str, data: bytes, state: str = "pending") -> None:
    await store.put(name, stream(data), tags={"state": state}, content_type="text/plain")


async def race(store: Store, payloads: list[bytes]) -> None:
    """Racing create-only puts of one name: with ``capabilities.create_only`` exactly one
    wins. Without it (an emulator's gap, asserted): every racer either won or was told the
    name exists, and the stored bytes are one winner's, whole."""
    name = new_name()
    results = await asyncio.gather(*(put(store, name, p) for p in payloads),
                                   return_exceptions=True)
    winners = [i for i, r in enumerate(results) if r is None]
    assert all(isinstance(r, BlobAlreadyExists) for r in results if r is not None), results
    if store.capabilities.create_only:
        assert len(winners) == 1, results
    else:
        assert winners, results
    assert await read_all(store, name) in [payloads[i] for i in winners]


class StoreContract:
    big: int = 600 * 1024

    async def test_round_trip(self, store: Store) -> None:
        name, data = new_name(), os.urandom(100_000)
        digests = await store.put(name, stream(data), tags=PENDING, content_type="text/plain")
        assert digests.size == len(data)
        assert digests.sha256 == hashlib.sha256(data).hexdigest()
        assert digests.md5 == hashlib.md5(data).hexdigest()
        assert await read_all(store, name) == data
        info = await store.stat(name)
        assert (info.size, info.sha256, info.md5) == (len(data), digests.sha256, digests.md5)
        assert info.content_type == "text/plain"
        assert await store.get_tags(name) == PENDING

    async def test_zero_bytes_is_a_blob(self, store: Store) -> None:
        name = new_name()
        digests = await store.put(name, stream(b""), tags=PENDING)
        assert digests.size == 0
        assert (await store.stat(name)).size == 0
        assert await read_all(store, name) == b""

    async def test_ranged_read(self, store: Store) -> None:
        name, data = new_name(), os.urandom(50_000)
        await put(store, name, data)
        assert await read_all(store, name, 1000, 500) == data[1000:1500]
        assert await read_all(store, name, 49_990) == data[49_990:]
        reader = await store.open(name, 10, 20)
        assert (reader.start, reader.length, reader.info.size) == (10, 20, 50_000)
        await reader.aclose()

    async def test_second_create_keeps_first_bytes(self, store: Store) -> None:
        name, first = new_name(), b"first version"
        await put(store, name, first)
        with pytest.raises(BlobAlreadyExists) as caught:
            await put(store, name, b"second version, longer")
        assert caught.value.computed is not None
        assert caught.value.computed.sha256 == hashlib.sha256(b"second version, longer").hexdigest()
        assert await read_all(store, name) == first
        assert await store.get_tags(name) == PENDING

    async def test_staged_upload_is_create_only(self, store: Store) -> None:
        name = new_name()
        first, second = os.urandom(self.big), os.urandom(self.big)
        await put(store, name, first)
        assert (await store.stat(name)).sha256 == hashlib.sha256(first).hexdigest()
        with pytest.raises(BlobAlreadyExists):
            await put(store, name, second)
        assert await read_all(store, name) == first

    async def test_a_staged_commit_never_overwrites(self, store: Store) -> None:
        """A staged upload's publication is create-only, as a put is. Two schedules: a
        duplicate completion of one upload, whose first completion published the blob
        (since retagged ``committed``), commits the same parts again: refused, or (S3,
        where completing a completed upload repeats its answer) answered without writing.
        An upload's parts were staged, then another writer published the name (a put),
        then the upload commits: refused. Either way the blob keeps its bytes and tags: a
        commit that re-created it would bring back the starting tag ``pending`` under a
        ready document. A store without staged uploads refuses the commit."""
        name = new_name()
        try:
            handle = await store.begin_staged(name, tags=PENDING, content_type="text/plain")
        except StoreError:  # no staged uploads: nothing can be published this way
            await put(store, name, b"published", state="committed")
            with pytest.raises(StoreError):
                await store.commit_staged(name, "", ["1"], tags=PENDING)
            assert (await read_all(store, name), await store.get_tags(name)) == (
                b"published", COMMITTED)
            return
        part = await store.stage(name, handle, 1, b"completed twice")
        await store.commit_staged(name, handle, [part], tags=PENDING,
                                  content_type="text/plain")
        await store.set_tags(name, COMMITTED, if_tags=PENDING)
        # refused as existing, or as missing parts (the local store's went with the first)
        with contextlib.suppress(BlobAlreadyExists, BlobNotFound):
            await store.commit_staged(name, handle, [part], tags=PENDING,
                                      content_type="text/plain")
        assert await read_all(store, name) == b"completed twice"
        assert await store.get_tags(name) == COMMITTED

        late = new_name()
        handle = await store.begin_staged(late, tags=PENDING, content_type="text/plain")
        part = await store.stage(late, handle, 1, b"the late upload's bytes")
        await put(store, late, b"published first", state="committed")
        with pytest.raises(BlobAlreadyExists):
            await store.commit_staged(late, handle, [part], tags=PENDING,
                                      content_type="text/plain")
        assert await read_all(store, late) == b"published first"
        assert await store.get_tags(late) == COMMITTED
        await store.abort_staged(late, handle)

    @pytest.mark.parametrize("racers", [5, 50])
    async def test_concurrent_creates_have_one_winner(self, store: Store, racers: int) -> None:
        await race(store, [f"writer {i} ".encode() * 100 for i in range(racers)])

    async def test_concurrent_staged_creates_have_one_winner(self, store: Store) -> None:
        await race(store, [os.urandom(self.big) for _ in range(5)])

    async def test_delete_with_wrong_tag_is_refused(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"precious", state="committed")
        with pytest.raises(ConditionNotMet):
            await store.delete(name, if_tags=PENDING)
        assert await read_all(store, name) == b"precious"
        assert await store.delete(name, if_tags=COMMITTED) is True
        with pytest.raises(BlobNotFound):
            await store.stat(name)

    async def test_double_delete_is_fine(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"x")
        assert await store.delete(name, if_tags=PENDING) is True
        assert await store.delete(name, if_tags=PENDING) is False
        assert await store.delete(new_name(), if_tags=PENDING) is False

    async def test_set_tags_conditioned_on_current_tag(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"x")
        await store.set_tags(name, COMMITTED, if_tags=PENDING)
        assert await store.get_tags(name) == COMMITTED
        # Refused whether the service enforces the condition or the store compares first
        # (``capabilities.state_conditioned_transition``; tested on the service directly in
        # each backend's own tests).
        with pytest.raises(ConditionNotMet):
            await store.set_tags(name, {"state": "deleting"}, if_tags=PENDING)
        assert await store.get_tags(name) == COMMITTED
        with pytest.raises(BlobNotFound):
            await store.set_tags(new_name(), COMMITTED, if_tags=PENDING)

    async def test_checksum_mismatch_leaves_nothing(self, store: Store) -> None:
        for size in (1000, self.big):
            name = new_name()
            with pytest.raises(IntegrityError):
                await store.put(name, stream(os.urandom(size)), tags=PENDING,
                                expected_sha256="0" * 64)
            with pytest.raises(BlobNotFound):
                await store.stat(name)
            assert [u async for u in store.list_uncommitted(name)] == []
            await put(store, name, b"the name is still free")

    async def test_expected_checksum_that_matches_is_accepted(self, store: Store) -> None:
        name, data = new_name(), os.urandom(3000)
        await store.put(name, stream(data), tags=PENDING,
                        expected_sha256=hashlib.sha256(data).hexdigest(),
                        expected_md5=hashlib.md5(data).hexdigest())
        assert await read_all(store, name) == data

    async def test_listing_in_name_order_with_tags(self, store: Store) -> None:
        base = f"l{uuid.uuid4().hex[:8]}"
        names = [f"{base}/b", f"{base}/a-c", f"{base}/a/b", f"{base}/a.z", f"{base}/a0",
                 f"{base}/A", f"{base}/a/a/z"]
        for i, name in enumerate(names):
            await put(store, name, b"x" * i, state="committed" if i % 2 else "pending")
        listed = [info async for info in store.list(base + "/")]
        assert [i.name for i in listed] == sorted(names)
        by_name = {i.name: i for i in listed}
        for i, name in enumerate(names):
            assert by_name[name].size == i
            assert by_name[name].tags == {"state": "committed" if i % 2 else "pending"}
        assert [i.name async for i in store.list(f"{base}/a/")] == sorted(
            [f"{base}/a/b", f"{base}/a/a/z"])
        assert [i.name async for i in store.list(f"{base}/a")] == sorted(
            n for n in names if n.startswith(f"{base}/a"))

    async def test_missing_blob_errors(self, store: Store) -> None:
        name = new_name()
        with pytest.raises(BlobNotFound):
            await store.stat(name)
        with pytest.raises(BlobNotFound):
            await store.get_tags(name)
        with pytest.raises(BlobNotFound):
            await store.open(name)

    @pytest.mark.parametrize("hostile", HOSTILE)
    async def test_hostile_names_are_rejected(self, store: Store, hostile: str) -> None:
        with pytest.raises(InvalidName):
            await put(store, hostile, b"x")
        with pytest.raises(InvalidName):
            await store.delete(hostile, if_tags=PENDING)
        with pytest.raises(InvalidName):
            await store.stat(hostile)

    async def test_delete_many_honours_each_condition(self, store: Store) -> None:
        names = [new_name() for _ in range(10)]
        for i, name in enumerate(names):
            await put(store, name, b"x", state="pending" if i % 2 else "committed")
        outcomes = await store.delete_many([(n, PENDING) for n in names] + [(new_name(), PENDING)])
        assert [o.deleted for o in outcomes[:10]] == [bool(i % 2) for i in range(10)]
        assert all(isinstance(o.error, ConditionNotMet) for o in outcomes[:10:2])
        assert outcomes[10].deleted is False and outcomes[10].error is None
        for i, name in enumerate(names):
            if i % 2 == 0:
                assert await store.get_tags(name) == COMMITTED
            else:
                with pytest.raises(BlobNotFound):
                    await store.stat(name)

    async def test_a_failing_source_publishes_nothing(self, store: Store) -> None:
        name = new_name()

        async def broken() -> AsyncIterator[bytes]:
            yield os.urandom(self.big // 2)
            yield os.urandom(self.big // 2)
            raise ConnectionResetError("client went away")

        with pytest.raises(ConnectionResetError):
            await store.put(name, broken(), tags=PENDING)
        with pytest.raises(BlobNotFound):
            await store.stat(name)
        await put(store, name, b"free")

    # -- no unconditional delete ------------------------------------------------------------
    async def test_a_delete_without_a_condition_is_refused(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"kept", state="committed")
        etag = (await store.stat(name)).etag
        refused: list[Callable[[], Awaitable[object]]] = [
            lambda: store.delete(name),  # type: ignore[call-overload]
            lambda: store.delete(name, if_tags={}),
            lambda: store.delete(name, if_tags=None),  # type: ignore[call-overload]
            lambda: store.delete(name, if_etag=""),
            lambda: store.delete(name, if_tags=COMMITTED, if_etag=etag),  # type: ignore[call-overload]
            lambda: store.delete_many([(name, {})]),
            lambda: store.delete_many([(new_name(), PENDING), (name, {})]),
            lambda: store.delete_many([(name, None)]),  # type: ignore[list-item]
        ]
        for attempt in refused:
            with pytest.raises(ValueError, match="condition"):
                await attempt()
        assert await read_all(store, name) == b"kept"

    async def test_a_delete_on_pending_never_removes_a_committed_blob(self, store: Store) -> None:
        """A retag to committed racing a delete conditioned on pending: either the delete
        came first (the retag finds nothing) or the blob survives, tagged committed."""
        names = [new_name() for _ in range(12)]
        for name in names:
            await put(store, name, b"racing")

        async def retag(name: str) -> bool:
            try:
                await store.set_tags(name, COMMITTED, if_tags=PENDING)
            except (BlobNotFound, ConditionNotMet):
                return False
            return True

        async def delete(name: str) -> bool:
            try:
                return await store.delete(name, if_tags=PENDING)
            except ConditionNotMet:
                return False

        for name in names:
            retagged, deleted = await asyncio.gather(retag(name), delete(name))
            if store.capabilities.state_conditioned_delete:
                assert retagged != deleted, name  # exactly one of them won
            else:
                # No tag-conditioned delete (S3): both may win the race; what protects a
                # committed blob there is the database fence (docs/backends.md).
                assert retagged or deleted, name
            if retagged and not deleted:
                assert await store.get_tags(name) == COMMITTED
                assert await read_all(store, name) == b"racing"
                with pytest.raises(ConditionNotMet):
                    await store.delete(name, if_tags=PENDING)
            else:
                with pytest.raises(BlobNotFound):
                    await store.stat(name)

    async def test_an_etag_conditioned_delete_spares_other_bytes(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"first bytes")
        first = (await store.stat(name)).etag
        listed = [i.etag async for i in store.list(name)]
        assert listed == [first]  # the listing and stat agree on the ETag
        assert await store.delete(name, if_tags=PENDING) is True
        await put(store, name, b"other bytes under the same name")
        second = (await store.stat(name)).etag
        assert second != first
        with pytest.raises(ConditionNotMet):
            await store.delete(name, if_etag=first)
        assert await read_all(store, name) == b"other bytes under the same name"
        await store.set_tags(name, COMMITTED, if_tags=PENDING)  # a retag keeps the ETag
        assert (await store.stat(name)).etag == second
        assert await store.delete(name, if_etag=second) is True
        assert await store.delete(name, if_etag=second) is False

    async def test_clearing_uncommitted_bytes_spares_a_committed_blob(self, store: Store) -> None:
        name = new_name()
        await put(store, name, b"committed", state="committed")
        await store.discard_uncommitted(name)
        await store.discard_uncommitted(new_name())  # nothing there: fine
        assert await read_all(store, name) == b"committed"
        assert await store.get_tags(name) == COMMITTED
