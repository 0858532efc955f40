"""The S3 backend on moto's S3 server joins the conformance suite, plus what only S3 shows:
multipart uploads, the ETag-conditioned delete, and moto's known gaps, asserted."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from blobledger.config import from_env
from blobledger.stores.s3 import S3Store
from blobledger.stores.s3.store import PARTS_IN_FLIGHT
from tests.stores.contract import PENDING, StoreContract, new_name, put, read_all, stream
from tests.support.faultproxy import FaultProxy, Request
from tests.support.services import MotoS3

PART = 5 * 1024 * 1024


def s3_store(moto: MotoS3, **options: Any) -> S3Store:
    return moto.store(**options)


class TestS3Store(StoreContract):
    big = 600 * 1024

    @pytest.fixture
    async def store(self, moto: MotoS3) -> AsyncIterator[S3Store]:
        store = s3_store(moto, single_put_limit=256 * 1024)
        await store.prepare()
        async with store:
            yield store


async def test_large_bodies_stream_as_multipart_in_bounded_parts(moto: MotoS3) -> None:
    store = s3_store(moto, single_put_limit=PART, part_size=PART)
    await store.prepare()
    async with store:
        name, data = new_name(), os.urandom(2 * PART + 12345)
        digests = await store.put(name, stream(data, 1 << 20), tags=PENDING)
        info = await store.stat(name)
        assert (info.size, info.sha256, info.md5) == (len(data), digests.sha256, digests.md5)
        assert await read_all(store, name) == data
        assert await store.get_tags(name) == PENDING  # checksum tags are not shown
        with pytest.raises(Exception) as refused:
            await store.put(name, stream(os.urandom(PART + 1)), tags=PENDING)
        assert type(refused.value).__name__ == "BlobAlreadyExists"
        assert [u async for u in store.list_uncommitted(name)] == []  # the loser aborted
        assert await read_all(store, name) == data


async def test_the_single_put_limit_setting_chooses_one_put_or_a_multipart_upload(
        moto: MotoS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store made from the settings sends a body up to BLOBLEDGER_S3_SINGLE_PUT_LIMIT as
    one create-only PutObject and a larger one as a multipart upload, both readable."""
    for variable, value in moto.environment().items():
        monkeypatch.setenv(variable, value)
    settings = from_env({**moto.environment(), "BLOBLEDGER_S3_SINGLE_PUT_LIMIT": "6MiB"})
    store = S3Store.from_settings(s3_store(moto).bucket, "", settings)
    assert store.single_put_limit == 6 << 20
    await store.prepare()
    async with store:
        s3 = await store._client()
        sent: list[str] = []
        for operation in ("put_object", "create_multipart_upload"):
            original = getattr(s3, operation)

            async def counted(*args: Any, _name: str = operation, _call: Any = original,
                              **kwargs: Any) -> Any:
                sent.append(_name)
                return await _call(*args, **kwargs)

            setattr(s3, operation, counted)
        at, above = os.urandom(6 << 20), os.urandom((6 << 20) + 1)
        await store.put("at-limit", stream(at, 1 << 20), tags=PENDING)
        await store.put("above-limit", stream(above, 1 << 20), tags=PENDING)
        assert sent == ["put_object", "create_multipart_upload"]
        assert await read_all(store, "at-limit") == at
        assert await read_all(store, "above-limit") == above
        with pytest.raises(Exception) as refused:
            await store.put("at-limit", stream(os.urandom(10)), tags=PENDING)
        assert type(refused.value).__name__ == "BlobAlreadyExists"


async def test_a_body_given_whole_is_sent_as_given_not_copied(moto: MotoS3) -> None:
    """A single put of a body the stream yields in one piece sends that very object: the
    read-ahead up to the single-put limit holds no second copy of it."""
    store = s3_store(moto)
    await store.prepare()
    async with store:
        s3 = await store._client()
        original, bodies = s3.put_object, []

        async def kept(**kwargs: Any) -> Any:
            bodies.append(kwargs["Body"])
            return await original(**kwargs)

        s3.put_object = kept
        data = os.urandom(3 << 20)
        await store.put(new_name(), stream(data, len(data)), tags=PENDING)
        assert bodies[0] is data


async def test_a_puts_parts_upload_concurrently_within_a_bounded_window(
        moto: MotoS3) -> None:
    """A large put sends its parts at once, never more than PARTS_IN_FLIGHT: the first two
    parts each wait until both are in flight (one after the other, the first would wait
    for ever), and the object is whole and in order."""
    store = s3_store(moto, single_put_limit=PART, part_size=PART)
    await store.prepare()
    async with store:
        s3 = await store._client()
        original, both = s3.upload_part, asyncio.Event()
        active = peak = 0

        async def tracked(**kwargs: Any) -> Any:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            try:
                if active >= 2:
                    both.set()
                if kwargs["PartNumber"] <= 2:
                    await asyncio.wait_for(both.wait(), 60)
                return await original(**kwargs)
            finally:
                active -= 1

        s3.upload_part = tracked
        name, data = new_name(), os.urandom(PARTS_IN_FLIGHT * 2 * PART + 3)
        digests = await store.put(name, stream(data, 1 << 20), tags=PENDING)
        assert 2 <= peak <= PARTS_IN_FLIGHT
        assert await read_all(store, name) == data
        assert (await store.stat(name)).sha256 == digests.sha256


async def test_each_parts_bytes_are_checked_in_transit_once(moto: MotoS3) -> None:
    """Over plain HTTP botocore signs every payload's SHA-256 (the server checks it), so a
    part carries no Content-MD5 as well (the MD5 would hash its bytes a second time); over
    HTTPS the signature leaves a payload with a Content-MD5 unsigned, so there the MD5 is
    the part's check."""
    store = s3_store(moto, single_put_limit=PART, part_size=PART)
    await store.prepare()
    sent: list[tuple[str | None, str | None]] = []

    def header(request: Any, name: str) -> str | None:
        value = request.headers.get(name)
        return value.decode() if isinstance(value, bytes) else value

    def seen(request: Any, **_: Any) -> None:
        sent.append((header(request, "Content-MD5"), header(request, "X-Amz-Content-SHA256")))

    async with store:
        (await store._client()).meta.events.register("before-send.s3.UploadPart", seen)
        name, data = new_name(), os.urandom(2 * PART + 7)
        await store.put(name, stream(data, 1 << 20), tags=PENDING)
        assert await read_all(store, name) == data
    parts = [data[:PART], data[PART:2 * PART], data[2 * PART:]]
    assert sorted(sent, key=lambda s: str(s[1])) == sorted(
        ((None, hashlib.sha256(p).hexdigest()) for p in parts), key=lambda s: str(s[1]))
    assert not store.payload_unsigned
    assert S3Store("bucket", endpoint_url="https://s3.example.test").payload_unsigned
    assert S3Store("bucket").payload_unsigned  # AWS's own endpoints: HTTPS


async def test_a_put_whose_stream_fails_between_parts_leaves_no_upload(moto: MotoS3) -> None:
    """The parts in flight are stopped and the multipart upload aborted."""
    store = s3_store(moto, single_put_limit=PART, part_size=PART)
    await store.prepare()

    async def failing() -> AsyncIterator[bytes]:
        for _ in range(3):
            yield os.urandom(PART)
        raise OSError("the client went away")

    async with store:
        name = new_name()
        with pytest.raises(OSError):
            await store.put(name, failing(), tags=PENDING)
        assert [u async for u in store.list_uncommitted(name)] == []
        assert [i async for i in store.list(name)] == []


async def test_an_interrupted_multipart_upload_is_listed_and_discarded(moto: MotoS3) -> None:
    """What a process killed mid-upload leaves: an incomplete multipart upload, reported by
    ``list_uncommitted`` and aborted by ``discard_uncommitted``."""
    store = s3_store(moto, single_put_limit=PART, part_size=PART)
    await store.prepare()
    async with store:
        name = new_name()
        s3 = await store._client()
        started = await s3.create_multipart_upload(Bucket=store.bucket, Key=name)
        await s3.upload_part(Bucket=store.bucket, Key=name, UploadId=started["UploadId"],
                             PartNumber=1, Body=b"x" * 1000)
        [left] = [u async for u in store.list_uncommitted("t/")]
        assert (left.name, left.blocks, left.size, left.committed) == (name, 1, 1000, False)
        await store.discard_uncommitted(name)
        assert [u async for u in store.list_uncommitted("t/")] == []


async def test_checksums_lost_to_a_crash_are_restored_from_the_bytes(moto: MotoS3) -> None:
    store = s3_store(moto, single_put_limit=1024)
    await store.prepare()
    async with store:
        name, data = new_name(), os.urandom(5000)
        digests = await store.put(name, stream(data), tags=PENDING)
        s3 = await store._client()  # a crash between the completion and its tagging
        await s3.put_object_tagging(Bucket=store.bucket, Key=name,
                                    Tagging={"TagSet": [{"Key": "state", "Value": "pending"}]})
        info = await store.stat(name)
        assert (info.sha256, info.md5) == (digests.sha256, digests.md5)
        assert (await store.stat(name)).sha256 == digests.sha256


async def test_moto_refuses_a_delete_whose_etag_changed(moto: MotoS3) -> None:
    """The service-side half of the delete guard: If-Match on DeleteObject."""
    store = s3_store(moto)
    await store.prepare()
    async with store:
        name = new_name()
        await put(store, name, b"kept")
        s3 = await store._client()
        with pytest.raises(Exception) as refused:
            await s3.delete_object(Bucket=store.bucket, Key=name, IfMatch='"0000"')
        assert "PreconditionFailed" in str(refused.value)
        assert await read_all(store, name) == b"kept"


async def test_a_key_prefix_holds_every_blob(moto: MotoS3) -> None:
    store = s3_store(moto, prefix="tenant-a/files")
    await store.prepare()
    async with store:
        name = new_name()
        await put(store, name, b"under the prefix")
        s3 = await store._client()
        keys = [o["Key"] for o in (await s3.list_objects_v2(Bucket=store.bucket))["Contents"]]
        assert keys == [f"tenant-a/files/{name}"]
        assert [i.name async for i in store.list()] == [name]
        assert store.url == f"s3://{store.bucket}/tenant-a/files"


async def test_a_staged_commit_asks_the_service_for_create_only(moto: MotoS3) -> None:
    """``commit_staged`` (a resumable upload's completion) sends CompleteMultipartUpload with
    ``If-None-Match: *``, as the request reaches the service (a recording proxy in front of
    moto). AWS refuses such a completion with 412 when the key exists (docs/backends.md);
    without the header a completion that stalled past another's publication would replace
    the ready document's object. moto shows nothing of it in that schedule (it answers a
    second completion of a completed upload without re-creating the object), so the header
    itself is what is checked."""
    seen: list[tuple[str, str | None]] = []

    def record(request: Request) -> bool:
        if request.method == "POST" and "uploadId" in request.query:
            seen.append((request.path, request.header("if-none-match")))
        return False  # forwarded as it came

    with FaultProxy(moto.port) as proxy:
        proxy.add(record, "never")
        store = moto.store(endpoint_url=f"http://127.0.0.1:{proxy.port}")
        await store.prepare()
        async with store:
            name = new_name()
            handle = await store.begin_staged(name, tags=PENDING)
            part = await store.stage(name, handle, 1, b"staged")
            await store.commit_staged(name, handle, [part], tags=PENDING)
            assert await read_all(store, name) == b"staged"
    assert [inm for path, inm in seen if path.endswith(name)] == ["*"], seen
