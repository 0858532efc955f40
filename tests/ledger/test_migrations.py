"""A database of the previous release (revision 0002, and each later one) upgrades in
place: pending intents keep their idempotency key, finished creations answer retries with
their first response, and the upgraded ledger works."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from blobledger import IdempotencyConflict, Ledger, NameTaken
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import QuotaExceeded
from blobledger.protocol.migrate import upgrade
from blobledger.protocol.transitions import UploadOwner
from blobledger.s3api.lookup import etag_of
from blobledger.s3api.rows import Shape, meta_of, parts_of, record_shape, shape_of
from blobledger.stores.local import LocalStore
from blobledger.uploads.resumable import Resumable
from blobledger.workers.sweeper import Sweeper
from tests.support.services import create_database, drop_database

NOW = datetime(2026, 11, 30, 12, 0, 0)


async def seed_previous_release(url: str, store: LocalStore) -> dict[str, str]:
    """Rows as release 0.1.0 wrote them: a ready document created under a key, and a
    pending intent under another key."""
    db = Database(url)
    async with db.engine.begin() as conn:
        await conn.run_sync(upgrade, "0002")
    ready_blob = f"documents/{uuid.uuid4().hex}.txt"
    pending_blob = f"documents/{uuid.uuid4().hex}.txt"

    async def one() -> AsyncIterator[bytes]:
        yield b"old release bytes"

    digests = await store.put(ready_blob, one(), tags={"state": "committed"})
    rows = [
        ("d1", "ready.txt", "ready", ready_blob, "committed", "key-ready", digests.sha256,
         digests.md5, digests.size),
        ("d2", "\x01unnamed:d2", "pending", pending_blob, "pending", "key-pending", None,
         None, None),
    ]
    async with db.engine.begin() as conn:
        for doc, name, status, blob, state, key, sha, md5, size in rows:
            await conn.execute(text(
                "INSERT INTO documents (id, name, status, blob_name, version, size, "
                "content_type, sha256, md5, created_at, updated_at) VALUES (:id, :name, "
                ":status, :blob, 1, :size, 'text/plain', :sha, :md5, :now, :now)"),
                dict(id=doc, name=name, status=status, blob=blob, size=size, sha=sha, md5=md5,
                     now=NOW))
            await conn.execute(text(
                "INSERT INTO blobs (name, document_id, kind, state, content_type, size, "
                "sha256, md5, idempotency_key, lease_until, created_at, changed_at) VALUES "
                "(:blob, :id, 'create', :state, 'text/plain', :size, :sha, :md5, :key, "
                ":lease, :now, :now)"),
                dict(blob=blob, id=doc, state=state, size=size, sha=sha, md5=md5, key=key,
                     lease=NOW + timedelta(hours=1), now=NOW))
    await db.dispose()
    return {"ready": ready_blob, "pending": pending_blob}


async def previous_release(url: str, tmp_path: Path, revision: str) -> tuple[LocalStore, str]:
    """A database at ``revision`` holding a previous release's rows, their blob (its name
    returned) in a local store under ``tmp_path``."""
    store = LocalStore(tmp_path / "blobs")
    await store.prepare()
    db = Database(url)
    async with db.engine.begin() as conn:
        await conn.run_sync(upgrade, revision)
    await db.dispose()
    return store, await seed_previous_release_rows(url, store)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_from_the_previous_release(kind: str, tmp_path: Path) -> None:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store = LocalStore(tmp_path / "blobs")
        await store.prepare()
        blobs = await seed_previous_release(url, store)
        async with Ledger(Database(url), store) as ledger:  # migrates to the head
            async with ledger.db.engine.connect() as conn:
                keys: dict[str, str] = dict((await conn.execute(text(
                    "SELECT key, state FROM idempotency_keys"))).all())
                columns = (await conn.execute(text("SELECT * FROM blobs"))).keys()
            assert keys == {"key-ready": "done", "key-pending": "pending"}
            assert "idempotency_key" not in columns and "attempt" in columns
            again = await ledger.create("ready.txt", b"old release bytes",
                                        idempotency_key="key-ready", content_type="text/plain")
            assert (again.id, again.version, again.blob) == ("d1", 1, blobs["ready"])
            fresh = await ledger.create("new.txt", b"new", idempotency_key="key-new")
            assert await ledger.get(fresh.id) == fresh
            # The previous release's pending intent (no owner token, a placeholder name):
            # once its lease and the margin have passed, a retry that knows the name
            # takes it over and finishes it under that name.
            ledger.clock_offset = 86400.0
            resumed = await ledger.create("late.txt", b"late bytes", content_type="text/plain",
                                          idempotency_key="key-pending")
            assert (resumed.id, resumed.name, resumed.blob) == ("d2", "late.txt",
                                                                 blobs["pending"])
    finally:
        if kind == "postgresql":
            await drop_database(url)


async def seed_replaced_and_deleted(url: str, store: LocalStore) -> dict[str, str]:
    """Release 0.1.0's rows for two documents created under keys: one replaced since (its
    first blob ``deleting``, the document at version 2 on another blob) and one deleted
    since (its document row gone, its blob ``deleting``)."""
    db = Database(url)
    async with db.engine.begin() as conn:
        await conn.run_sync(upgrade, "0002")

    async def one(data: bytes) -> AsyncIterator[bytes]:
        yield data

    first, second, deleted = (f"documents/{uuid.uuid4().hex}.txt" for _ in range(3))
    v1 = await store.put(first, one(b"first bytes"), tags={"state": "deleting"})
    v2 = await store.put(second, one(b"second bytes"), tags={"state": "committed"})
    gone = await store.put(deleted, one(b"deleted bytes"), tags={"state": "deleting"})
    blob_rows = [
        (first, "d3", "create", "deleting", "key-replaced", v1),
        (second, "d3", "replace", "committed", None, v2),
        (deleted, "d4", "create", "deleting", "key-deleted", gone),
    ]
    async with db.engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO documents (id, name, status, blob_name, version, size, content_type, "
            "sha256, md5, created_at, updated_at) VALUES ('d3', 'replaced.txt', 'ready', "
            ":blob, 2, :size, 'text/plain', :sha, :md5, :created, :now)"),
            dict(blob=second, size=v2.size, sha=v2.sha256, md5=v2.md5, created=NOW,
                 now=NOW + timedelta(minutes=5)))
        for blob, doc, kind, state, key, digests in blob_rows:
            await conn.execute(text(
                "INSERT INTO blobs (name, document_id, kind, state, content_type, size, "
                "sha256, md5, idempotency_key, lease_until, created_at, changed_at) VALUES "
                "(:blob, :doc, :kind, :state, 'text/plain', :size, :sha, :md5, :key, :now, "
                ":now, :now)"),
                dict(blob=blob, doc=doc, kind=kind, state=state, size=digests.size,
                     sha=digests.sha256, md5=digests.md5, key=key, now=NOW))
    await db.dispose()
    return {"first": first, "sha256": v1.sha256}


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_keeps_the_keys_of_replaced_and_deleted_documents(
        kind: str, tmp_path: Path) -> None:
    """A retry under the key of a document replaced since the creation gets the first
    response (version 1, its first blob); under the key of a document deleted since (0002
    kept neither its name nor the time of C4) it is refused as 0002 refused it, and never
    creates a second document."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store = LocalStore(tmp_path / "blobs")
        await store.prepare()
        seeded = await seed_replaced_and_deleted(url, store)
        async with Ledger(Database(url), store) as ledger:
            again = await ledger.create("replaced.txt", b"first bytes", content_type="text/plain",
                                        idempotency_key="key-replaced")
            assert (again.id, again.name, again.version, again.blob, again.sha256) == (
                "d3", "replaced.txt", 1, seeded["first"], seeded["sha256"])
            assert again.created_at == NOW.replace(tzinfo=UTC)
            with pytest.raises(IdempotencyConflict, match="deleted"):
                await ledger.create("deleted.txt", b"deleted bytes", content_type="text/plain",
                                    idempotency_key="key-deleted")
            assert [doc.name async for doc in ledger.list()] == ["replaced.txt"]
            assert (await ledger.get("d3")).version == 2
    finally:
        if kind == "postgresql":
            await drop_database(url)


async def seed_open_upload(url: str) -> None:
    """Release 0.2.0's rows (revision 0005) of an open tus upload: its pending document, its
    blob row and its upload row, which names no owner."""
    db = Database(url)
    async with db.engine.begin() as conn:
        await conn.run_sync(upgrade, "0005")
        params = dict(blob="documents/old-upload.txt", now=NOW,
                      later=datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1))
        await conn.execute(text(
            "INSERT INTO documents (id, name, status, blob_name, version, content_type, "
            "created_at, updated_at) VALUES ('d5', 'old-upload.txt', 'pending', :blob, 1, "
            "'text/plain', :now, :now)"), params)
        await conn.execute(text(
            "INSERT INTO blobs (name, document_id, kind, state, content_type, attempt, "
            "lease_until, created_at, changed_at) VALUES (:blob, 'd5', 'create', 'pending', "
            "'text/plain', 'attempt5', :later, :now, :now)"), params)
        await conn.execute(text(
            "INSERT INTO uploads (id, mode, blob_name, document_id, attempt, state, length, "
            "\"offset\", handle, parts, meta, created_at, changed_at, expires_at) VALUES "
            "('u5', 'tus', :blob, 'd5', 'attempt5', 'open', 10, 0, '', '[]', "
            "'{\"name\": \"old-upload.txt\"}', :now, :now, :later)"), params)
    await db.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_gives_uploads_an_owner(kind: str, tmp_path: Path) -> None:
    """0006 adds ``uploads.owner``: a previous release's open upload keeps working and
    counts against no token; a token's uploads are counted against its limit."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store = LocalStore(tmp_path / "blobs")
        await store.prepare()
        await seed_open_upload(url)
        async with Ledger(Database(url), store) as ledger:
            async with ledger.db.engine.connect() as conn:
                owners = (await conn.execute(text("SELECT id, owner FROM uploads"))).all()
            assert [tuple(row) for row in owners] == [("u5", None)]
            resumable = Resumable(ledger)
            old = await resumable.find("u5")
            assert (old.offset, old.length) == (0, 10)
            owner = UploadOwner("0123456789abcdef", max_open=1, max_names=1)
            await resumable.create(3, {"name": "new-upload.txt"}, owner)
            with pytest.raises(QuotaExceeded, match="open uploads"):
                await resumable.create(3, {"name": "another.txt"}, owner)
    finally:
        if kind == "postgresql":
            await drop_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_adds_the_events(kind: str, tmp_path: Path) -> None:
    """0007 adds ``events`` and ``event_deliveries``: a previous release's database (0006)
    upgrades with no event for its past changes; its ready document's next change writes
    one, and a new document's ``document.ready``, in order."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store, _ = await previous_release(url, tmp_path, "0006")
        async with Ledger(Database(url), store) as ledger:
            async with ledger.db.engine.connect() as conn:
                assert (await conn.execute(text("SELECT count(*) FROM events"))) \
                    .scalar_one() == 0
            await ledger.delete("d1")
            doc = await ledger.create("new.txt", b"new")
            async with ledger.db.engine.connect() as conn:
                rows = (await conn.execute(text(
                    "SELECT type, subject, state FROM events ORDER BY id"))).all()
            assert [tuple(row) for row in rows] == [
                ("document.deleted", "d1", "pending"), ("document.ready", doc.id, "pending")]
    finally:
        if kind == "postgresql":
            await drop_database(url)


async def seed_previous_release_rows(url: str, store: LocalStore) -> str:
    """A ready document as release 0006 holds it (no idempotency key)."""
    blob = f"documents/{uuid.uuid4().hex}.txt"

    async def one() -> AsyncIterator[bytes]:
        yield b"0006 bytes"

    digests = await store.put(blob, one(), tags={"state": "committed"})
    db = Database(url)
    async with db.engine.begin() as conn:
        params = dict(blob=blob, now=NOW, sha=digests.sha256, md5=digests.md5,
                      size=digests.size)
        await conn.execute(text(
            "INSERT INTO documents (id, name, status, blob_name, version, size, content_type, "
            "sha256, md5, created_at, updated_at) VALUES ('d1', 'old.txt', 'ready', :blob, 1, "
            ":size, 'text/plain', :sha, :md5, :now, :now)"), params)
        await conn.execute(text(
            "INSERT INTO blobs (name, document_id, kind, state, content_type, size, sha256, "
            "md5, lease_until, created_at, changed_at) VALUES (:blob, 'd1', 'create', "
            "'committed', 'text/plain', :size, :sha, :md5, :now, :now, :now)"), params)
    await db.dispose()
    return blob


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_holds_nothing_and_owes_no_retag(kind: str, tmp_path: Path) -> None:
    """0008 (held documents) and 0009 (the deferred retag) on a previous release's database
    (0006): its ready document is neither held nor owes a retag, stays readable, and a
    deferred create then owes exactly its own retag, which the sweep's retag worker pays."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store, _ = await previous_release(url, tmp_path, "0006")
        async with Ledger(Database(url), store, Settings(retag="deferred")) as ledger:
            old = await ledger.get("d1")
            assert old.status == "ready"
            assert b"".join([c async for c in ledger.read("d1")]) == b"0006 bytes"
            assert await ledger.hold_state("d1") is None
            new = await ledger.create("new.txt", b"new")
            async with ledger.db.engine.connect() as conn:
                owed = (await conn.execute(text(
                    "SELECT name FROM blobs WHERE retag_due IS NOT NULL"))).scalars().all()
                held = (await conn.execute(text(
                    "SELECT count(*) FROM documents WHERE hold"))).scalar_one()
            assert owed == [new.blob] and held == 0
            report = await Sweeper(ledger).run_once()
            assert (report.retagged, report.errors) == (1, 0)
            assert (await store.get_tags(new.blob)) == {"state": "committed"}
    finally:
        if kind == "postgresql":
            await drop_database(url)


async def test_upgrade_counts_the_grace_from_the_commit(tmp_path: Path) -> None:
    """0011 on a previous release's PostgreSQL database (0009): a row moved to ``deleting``
    in a transaction that ran for a while is ``deleting`` from its commit, not from the
    statement's ``now()`` (the transaction's start)."""
    url = await create_database()
    try:
        store, blob = await previous_release(url, tmp_path, "0009")
        async with Ledger(Database(url), store) as ledger:
            async with ledger.db.engine.begin() as conn:
                await conn.execute(text(
                    "UPDATE blobs SET state = 'deleting', changed_at = now() AT TIME ZONE "
                    "'UTC' WHERE name = :n"), {"n": blob})
                before_commit, started = (await conn.execute(text(
                    "SELECT clock_timestamp() AT TIME ZONE 'UTC', now() AT TIME ZONE "
                    "'UTC'"))).one()
            async with ledger.db.engine.connect() as conn:
                since = (await conn.execute(text(
                    "SELECT changed_at FROM blobs WHERE name = :n"), {"n": blob})).scalar_one()
            assert started < before_commit <= since
    finally:
        await drop_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_puts_every_document_in_the_default_bucket(kind: str,
                                                                tmp_path: Path) -> None:
    """0012 (buckets) on a previous release's database (0011): its document lands in the
    default bucket, stays readable and listed, keeps its name taken there, and the same
    name can then be created in a new bucket of its own."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store, _ = await previous_release(url, tmp_path, "0011")
        async with Ledger(Database(url), store) as ledger:
            old = await ledger.get("d1")
            assert (old.bucket, old.name) == ("default", "old.txt")
            assert [d.id for d in await ledger.page()] == ["d1"]
            assert [b.name for b in await ledger.buckets.list()] == ["default"]
            with pytest.raises(NameTaken):
                await ledger.create("old.txt", b"again")
            await ledger.buckets.create("archive")
            moved = await ledger.create("old.txt", b"in the archive", bucket="archive")
            assert moved.bucket == "archive"
            assert [d.id for d in await ledger.page(bucket="archive")] == [moved.id]
            assert b"".join([c async for c in ledger.read("d1")]) == b"0006 bytes"
    finally:
        if kind == "postgresql":
            await drop_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_keeps_s3_rows_and_gives_etags_of_md5(kind: str, tmp_path: Path) -> None:
    """0014 (a multipart object's shape, a part's checksum) on a previous release's database
    (0013): its object keeps its metadata and is of one part, its ETag the MD5 its document
    records (the first 128 bits of the SHA-256 for a version recorded without one); its
    upload's part keeps its row, without a checksum; a shape is then recorded and read."""
    url = (f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite"
           else await create_database())
    try:
        store, blob = await previous_release(url, tmp_path, "0013")
        db = Database(url)
        async with db.engine.begin() as conn:
            params = dict(now=NOW, blob="documents/no-md5.txt", sha="ab" * 32)
            await conn.execute(text(
                "INSERT INTO documents (id, name, status, blob_name, version, size, "
                "content_type, sha256, md5, created_at, updated_at) VALUES ('d2', 'no-md5.txt',"
                " 'ready', :blob, 1, 3, 'text/plain', :sha, NULL, :now, :now)"), params)
            await conn.execute(text(
                "INSERT INTO s3_objects (blob_name, meta, created_at) VALUES "
                "(:blob, '{\"colour\": \"blue\"}', :now)"), dict(blob=blob, now=NOW))
            await conn.execute(text(
                "INSERT INTO s3_parts (upload_id, number, part, size, md5, created_at) VALUES "
                "('u1', 1, 'p1', 5, :md5, :now)"), dict(md5="cd" * 16, now=NOW))
        await db.dispose()
        async with Ledger(Database(url), store) as ledger:
            old, bare = await ledger.get("d1"), await ledger.get("d2")
            assert old.md5 == hashlib.md5(b"0006 bytes").hexdigest()
            assert await meta_of(ledger, blob) == {"colour": "blue"}
            assert await shape_of(ledger, blob) is None
            assert etag_of(old, None) == f'"{old.md5}"'
            assert (bare.md5, etag_of(bare, None)) == (None, '"' + "ab" * 16 + '"')
            assert [(p.number, p.md5, p.checksum) for p in await parts_of(ledger, "u1")] == [
                (1, "cd" * 16, None)]
            shape = Shape("ef" * 16 + "-2", ((5, "AAAAAA=="), (3, "AAAAAQ==")), "CRC32",
                          "FULL_OBJECT", "AAAAAg==")
            await record_shape(ledger, blob, shape)
            assert await shape_of(ledger, blob) == shape
            assert await meta_of(ledger, blob) == {"colour": "blue"}
    finally:
        if kind == "postgresql":
            await drop_database(url)
