"""The ledger's buckets: a bucket is deleted only while it holds no document (a pending
intent counts), a name is unique per bucket, the bucket's settings admit or refuse a write
before its C1, and a credential's buckets bound every read (each database: what decides is
the database's statements; the local disk takes the bytes)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, insert, select

from blobledger import Ledger, NameTaken, NotFound, UploadTooLarge
from blobledger.errors import (
    BucketExists,
    BucketForbidden,
    BucketNotEmpty,
    BucketNotFound,
    BucketQuotaExceeded,
    ContentTypeRefused,
    InvalidInput,
)
from blobledger.protocol.buckets import Buckets, scoped
from blobledger.protocol.models import BlobRow, DocumentRow
from blobledger.uploads.resumable import Resumable
from tests.conftest import EACH_DATABASE

blobs_table = BlobRow.__table__

pytestmark = pytest.mark.parametrize("backend", EACH_DATABASE, indirect=True)


async def test_a_bucket_holding_a_pending_intent_is_not_deleted(ledger: Ledger) -> None:
    await ledger.buckets.create("kept")
    await ledger.buckets.create("other")
    intent = await ledger.begin_create("in-flight.bin", "application/octet-stream",
                                       bucket="kept")
    with pytest.raises(BucketNotEmpty):
        await ledger.buckets.delete("kept")
    assert (await ledger.buckets.get("kept")).name == "kept"
    assert (await ledger.buckets.usage("kept")).objects == 1
    assert (await ledger.buckets.usage("other")).objects == 0
    await ledger.buckets.delete("other")  # the empty one goes, and only it
    assert [b.name for b in await ledger.buckets.list()] == ["default", "kept"]
    with pytest.raises(BucketNotFound):
        await ledger.buckets.delete("other")
    with pytest.raises(InvalidInput):
        await ledger.buckets.delete("default")
    assert intent.bucket == "kept"


async def test_a_name_is_unique_per_bucket(ledger: Ledger) -> None:
    await ledger.buckets.create("second")
    with pytest.raises(BucketExists):
        await ledger.buckets.create("second")
    first = await ledger.create("same.txt", b"one")
    other = await ledger.create("same.txt", b"two", bucket="second")
    with pytest.raises(NameTaken):
        await ledger.create("same.txt", b"three", bucket="second")
    assert [d.id for d in await ledger.page()] == [first.id]
    assert [d.id for d in await ledger.page(bucket="second")] == [other.id]
    with pytest.raises(BucketNotFound):
        await ledger.create("x.txt", b"x", bucket="nowhere")


async def test_the_settings_admit_or_refuse_a_write(ledger: Ledger) -> None:
    await ledger.buckets.create("strict", content_types=["text/*"], max_object_bytes=4,
                                quota_objects=2, quota_bytes=6)
    with pytest.raises(ContentTypeRefused):
        await ledger.create("a.bin", b"a", content_type="application/octet-stream",
                            bucket="strict")
    with pytest.raises(UploadTooLarge):
        await ledger.create("a.txt", b"12345", content_type="text/plain", bucket="strict")

    async def stream() -> AsyncIterator[bytes]:
        yield b"1234"
        yield b"5"

    with pytest.raises(UploadTooLarge):  # cut where the largest object ends
        await ledger.create("s.txt", stream(), content_type="text/plain", bucket="strict")
    kept = await ledger.create("a.txt", b"1234", content_type="text/plain", bucket="strict")
    with pytest.raises(BucketQuotaExceeded):  # 4 of 6 bytes taken
        await ledger.create("b.txt", b"123", content_type="text/plain", bucket="strict")
    await ledger.create("b.txt", b"12", content_type="text/plain", bucket="strict")
    with pytest.raises(BucketQuotaExceeded):  # 2 of 2 documents
        await ledger.create("c.txt", b"", content_type="text/plain", bucket="strict")
    replaced = await ledger.replace(kept.id, b"abcd", expected_version=1,
                                    content_type="text/plain")  # frees its old bytes
    assert replaced.bucket == "strict"
    assert (await ledger.buckets.usage("strict")).objects == 2


async def test_a_credential_limited_to_buckets_reads_only_those(ledger: Ledger) -> None:
    await ledger.buckets.create("mine")
    theirs = await ledger.create("theirs.txt", b"t")
    mine = await ledger.create("mine.txt", b"m", bucket="mine")
    with scoped(frozenset({"mine"})):
        assert (await ledger.get(mine.id)).name == "mine.txt"
        with pytest.raises(NotFound):
            await ledger.get(theirs.id)
        with pytest.raises(NotFound):
            await ledger.delete(theirs.id)
        with pytest.raises(BucketNotFound):
            await ledger.page()
        with pytest.raises(BucketForbidden):
            await ledger.create("x.txt", b"x")
        assert [b.name for b in await ledger.buckets.list()] == ["mine"]
    assert (await ledger.get(theirs.id)).name == "theirs.txt"


async def test_a_create_into_a_bucket_deleted_since_its_lookup_is_refused(
        ledger: Ledger) -> None:
    """Another process deletes the empty bucket after this one looked it up (each process
    trusts its lookup two seconds; a writer paused between its lookup and its C1, any
    time): the documents' foreign key refuses C1, before any byte is sent, as NotFound,
    and the name created anew holds nothing of it."""
    await ledger.buckets.create("brief")
    await ledger.buckets.lookup("brief")  # this process's view, trusted for two seconds
    await Buckets(ledger.db).delete("brief")  # another process's
    with pytest.raises(BucketNotFound):
        await ledger.create("late.txt", b"late bytes", bucket="brief")
    with pytest.raises(BucketNotFound):  # a resumable upload's C1 alike
        await Resumable(ledger).create(10, {"filename": "late.bin", "bucket": "brief"})
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix)] == []
    async with ledger.db.transaction(readonly=True) as conn:
        assert (await conn.execute(select(func.count()).select_from(blobs_table))).scalar() == 0
    await ledger.buckets.create("brief")
    assert await ledger.page(bucket="brief") == []
    assert (await ledger.buckets.usage("brief")).objects == 0


async def test_a_bucket_is_not_deleted_under_a_create_whose_c1_is_in_flight(
        ledger: Ledger) -> None:
    """The deletion runs while a create's C1 has inserted its pending document but not yet
    committed: it waits for that transaction (PostgreSQL: the foreign key's lock on the
    bucket's row; SQLite: the one writer) and is then refused, the bucket kept."""
    await ledger.buckets.create("busy")
    now = datetime.now(UTC).replace(tzinfo=None)
    async with ledger.db.transaction() as conn:
        await conn.execute(insert(DocumentRow).values(
            id="0" * 32, bucket="busy", name="in-flight.bin", status="pending",
            blob_name="documents/in-flight.bin", version=1,
            content_type="application/octet-stream", created_at=now, updated_at=now))
        deletion = asyncio.create_task(Buckets(ledger.db).delete("busy"))
        await asyncio.sleep(0.5)  # the deletion has been sent and waits
        assert not deletion.done()
    with pytest.raises(BucketNotEmpty):
        await deletion
    assert (await ledger.buckets.get("busy")).name == "busy"
