"""The reconciler on a container seeded with every category, on every backend."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import delete

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.errors import ConfigError
from blobledger.protocol.documents import Document
from blobledger.protocol.models import BlobKind, BlobRow, BlobState, DocumentRow, utcnow
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from blobledger.stores.s3 import S3Store
from blobledger.uploads.resumable import Resumable
from blobledger.workers.reconciler import Finding, reconcile
from tests.conftest import new_container
from tests.stores.contract import read_all
from tests.stores.test_azure import commit_before_delete
from tests.support.services import Azurite
from tests.sweeper.support import HOUR, one, rows, seed_intent, stored


async def leave_uncommitted(ledger: Ledger, name: str) -> None:
    """What a staged upload that died before committing leaves under ``name``."""
    store = ledger.store
    if isinstance(store, AzureStore):
        block = base64.b64encode(b"0" * 32).decode()
        await store._client().get_blob_client(name).stage_block(block, b"lost bytes")
    elif isinstance(store, S3Store):
        s3 = await store._client()
        started = await s3.create_multipart_upload(Bucket=store.bucket, Key=name)
        await s3.upload_part(Bucket=store.bucket, Key=name, UploadId=started["UploadId"],
                             PartNumber=1, Body=b"lost bytes")
    else:
        assert isinstance(store, LocalStore)
        part = Path(store.root) / "uploads" / f"{quote(name, safe='')}.{os.urandom(8).hex()}.part"
        part.write_bytes(b"lost bytes")


async def orphan(ledger: Ledger, suffix: str, tag: str | None) -> str:
    name = f"{ledger.settings.blob_prefix}/orphan-{suffix}"
    await ledger.store.put(name, one(b"orphan"), tags={"state": tag} if tag else {})
    return name


async def test_every_category_and_the_fix(ledger: Ledger) -> None:
    clean = await ledger.create("clean.txt", b"all is well")
    lost = await ledger.create("lost.txt", b"bytes that vanish")
    await ledger.store.delete(lost.blob, if_tags={"state": "committed"})  # a bug, simulated
    missing = await seed_intent(ledger, tag=None)  # a stale intent, its blob never uploaded
    mismatch = await seed_intent(ledger, tag="pending", state=BlobState.COMMITTED,
                                 kind=BlobKind.CREATE)
    in_flight = await seed_intent(ledger, tag="committed", age=10)  # between C3 and C4
    orphans = {tag or "untagged": await orphan(ledger, tag or "untagged", tag)
               for tag in ("pending", "deleting", "committed", None)}
    uncommitted = f"{ledger.settings.blob_prefix}/uncommitted-blocks"
    await leave_uncommitted(ledger, uncommitted)
    ledger.clock_offset = 3 * HOUR  # everything seeded is old now
    seen: list[Finding] = []
    report = await reconcile(ledger, fix=False, older_than=2 * HOUR, on_finding=seen.append)
    found = {(f.category, f.name) for f in seen}
    assert ("missing_ready", lost.blob) in found
    assert ("missing", missing) in found
    assert ("mismatch", mismatch) in found
    assert {("orphan", name) for name in orphans.values()} <= found
    assert ("uncommitted", uncommitted) in found
    assert clean.blob not in {f.name for f in seen}
    assert (report.missing_ready, report.missing, report.orphan, report.uncommitted) == (
        1, 1, 4, 1)
    assert report.mismatch == 2  # the seeded mismatch and the old C3 intent
    assert ("mismatch", in_flight) in found  # old now: the sweeper's to roll forward
    assert report.exit_code == 2
    assert not any(f.fixed for f in seen)

    seen.clear()
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR, on_finding=seen.append)
    assert {f.name for f in seen if f.fixed} == {
        orphans["pending"], orphans["deleting"], orphans["untagged"], uncommitted}
    assert report.fixed == 4
    assert [u async for u in ledger.store.list_uncommitted(uncommitted)] == []
    left = await stored(ledger)
    assert orphans["committed"] in left  # never touched
    assert not {orphans["pending"], orphans["deleting"], orphans["untagged"]} & set(left)


async def test_young_work_is_in_flight_not_a_finding(ledger: Ledger) -> None:
    await ledger.create("fine.txt", b"fine")
    await seed_intent(ledger, tag=None, age=5)  # C1 just happened
    await seed_intent(ledger, tag="committed", age=5)  # between C3 and C4
    report = await reconcile(ledger, fix=True, older_than=HOUR)
    assert (report.total, report.in_flight, report.exit_code) == (0, 2, 0)
    assert report.blobs == 2 and report.rows == 3


async def test_fix_leaves_young_orphans(ledger: Ledger) -> None:
    name = await orphan(ledger, "young", "pending")
    report = await reconcile(ledger, fix=True, older_than=HOUR)
    assert (report.orphan, report.fixed, report.exit_code) == (1, 0, 1)
    assert name in await stored(ledger)


async def test_order_is_code_point_order_on_both_sides(ledger: Ledger) -> None:
    """Names whose order differs between code point and natural-language collations."""
    prefix = ledger.settings.blob_prefix
    names = [f"{prefix}/{n}" for n in ("Zeta", "alpha-1", "alpha.1", "alpha1", "alpha_1",
                                        "alphA", "b")]
    now = utcnow()
    async with ledger.db.session() as session:
        for i, name in enumerate(names):
            session.add(DocumentRow(id=f"{i:032x}", name=f"doc{i}", status="ready",
                                    blob_name=name, version=1, content_type="text/plain",
                                    created_at=now, updated_at=now))
            session.add(BlobRow(name=name, document_id=f"{i:032x}", kind="create",
                                state="committed", content_type="text/plain",
                                lease_until=now, created_at=now, changed_at=now))
    for name in names:
        await ledger.store.put(name, one(b"x"), tags={"state": "committed"})
    report = await reconcile(ledger, fix=False, older_than=HOUR)
    assert (report.total, report.blobs, report.rows) == (0, len(names), len(names))


async def test_older_than_below_the_deadline_is_refused(ledger: Ledger) -> None:
    name = await orphan(ledger, "kept", "pending")
    with pytest.raises(ConfigError, match="upload deadline"):
        await reconcile(ledger, fix=True, older_than=10)
    assert name in await stored(ledger)
    assert await rows(ledger) == {}
    # the deadline itself is not shorter than the deadline: accepted
    report = await reconcile(ledger, fix=False, older_than=ledger.settings.upload_deadline)
    assert report.blobs == 1


@pytest.mark.parametrize("leftover", ["orphan", "uncommitted"])
async def test_a_row_that_appears_before_the_fix_stops_it(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, leftover: str
) -> None:
    """A name that a row refers to is never cleaned as garbage: here the row appears after
    the name was listed (a retry resuming its intent) and before the fix acts on it."""
    name = f"{ledger.settings.blob_prefix}/appears-{leftover}"
    if leftover == "orphan":
        await ledger.store.put(name, one(b"pending bytes"), tags={"state": "pending"})
    else:
        await leave_uncommitted(ledger, name)
    ledger.clock_offset = 3 * HOUR
    method = "list" if leftover == "orphan" else "list_uncommitted"
    listing = getattr(ledger.store, method)

    def listed_then_row(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async def entries() -> AsyncIterator[Any]:
            async for info in listing(*args, **kwargs):
                if info.name == name and name not in await rows(ledger):
                    await seed_intent(ledger, tag=None, name=name)
                yield info
        return entries()

    monkeypatch.setattr(ledger.store, method, listed_then_row)
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
    assert report.fixed == 0
    if leftover == "orphan":
        assert report.orphan == 0, report  # a name with a row is not an orphan
        assert await stored(ledger) == {name: "pending"}
    else:
        assert report.kept == 1
        assert [u.name async for u in listing(name)] == [name]


async def test_fix_never_deletes_a_blob_committed_by_a_resumed_upload(
    azurite: Azurite, tmp_path: Path
) -> None:
    """A crashed staged upload left blocks; a retry resumes the intent and commits them
    right before the reconciler's delete would reach the service."""
    container, name = new_container(), "documents/resumed.bin"
    block = base64.b64encode(b"0" * 32).decode()
    store = AzureStore(container, connection_string=azurite.connection_string,
                       client_options={"raw_request_hook": commit_before_delete(
                           azurite, container, name, block)})
    await store.prepare()
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as ledger:
        await store._client().get_blob_client(name).stage_block(block, b"resumed bytes")
        await seed_intent(ledger, tag=None, name=name)  # the intent the retry resumes
        ledger.clock_offset = 3 * HOUR
        report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
        assert (report.uncommitted, report.kept, report.fixed) == (1, 1, 0)
        async with ledger.db.session() as session:  # say the sweeper removed the row
            await session.execute(delete(DocumentRow))
            await session.execute(delete(BlobRow))
        report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
        assert report.fixed == 0  # the commit came first: the service refused the delete
        assert await store.get_tags(name) == {"state": "committed"}
        assert await read_all(store, name) == b"resumed bytes"


async def test_leftover_bytes_beside_a_finished_blob_are_cleared(ledger: Ledger) -> None:
    """A dead attempt's leftover bytes under the name a retry then committed: only a pending
    intent can resume them, so under a committed row they are cleared (where the store can
    clear them without touching the blob) and the blob stays."""
    doc = await ledger.create("finished.txt", b"the committed bytes")
    await leave_uncommitted(ledger, doc.blob)
    ledger.clock_offset = 3 * HOUR
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
    assert report.kept == 0
    assert await read_all(ledger.store, doc.blob) == b"the committed bytes"
    left = [u async for u in ledger.store.list_uncommitted(doc.blob)]
    if isinstance(ledger.store, AzureStore):  # blocks beside a committed blob: service's job
        assert report.fixed == 0 and len(left) == 1
    else:
        assert report.fixed == 1 and left == []


async def test_an_open_upload_keeps_only_its_own_blob_in_flight(ledger: Ledger) -> None:
    """A resumable upload is open while a stale intent's blob is missing and a dead staged
    upload left uncommitted bytes: the open upload keeps its own blob in flight, not the
    others, which are found."""
    await Resumable(ledger).create(5, {"name": "in-flight.txt"})
    missing = await seed_intent(ledger, tag=None)
    uncommitted = f"{ledger.settings.blob_prefix}/uncommitted-blocks"
    await leave_uncommitted(ledger, uncommitted)
    ledger.clock_offset = 3 * HOUR  # past every cutoff, before the upload's expiry
    seen: list[Finding] = []
    await reconcile(ledger, fix=False, older_than=2 * HOUR, on_finding=seen.append)
    found = {(f.category, f.name) for f in seen}
    assert {("missing", missing), ("uncommitted", uncommitted)} <= found, found


async def test_an_expired_upload_is_no_longer_in_flight(ledger: Ledger) -> None:
    """A resumable upload past its expiry, not swept yet, whose blob was never stored: its
    row is found missing (the sweeper's to remove), no longer counted in flight."""
    upload = await Resumable(ledger).create(5, {"name": "expired.txt"})
    ledger.clock_offset = ledger.settings.resumable_expiry + 3 * HOUR
    seen: list[Finding] = []
    await reconcile(ledger, fix=False, older_than=2 * HOUR, on_finding=seen.append)
    assert ("missing", upload.blob_name) in {(f.category, f.name) for f in seen}, seen


async def test_a_completed_upload_no_longer_keeps_its_blob_in_flight(ledger: Ledger) -> None:
    """A resumable upload completed (done, before its expiry) and a dead attempt's bytes
    were left under its committed blob: the done upload holds nothing in flight, so the
    leftovers are cleared as beside any finished blob."""
    resumable = Resumable(ledger)
    upload = await resumable.create(5, {"name": "completed.txt"})

    async def body() -> AsyncIterator[bytes]:
        yield b"bytes"

    assert await resumable.append(upload, 0, body()) == 5
    doc = await resumable.complete(await resumable.find(upload.id))
    assert isinstance(doc, Document) and doc.name == "completed.txt"
    found = await ledger.transitions.find_upload(upload.id)
    assert found is not None and found.state == "done"
    await leave_uncommitted(ledger, upload.blob_name)
    ledger.clock_offset = 3 * HOUR  # before the upload's expiry
    report = await reconcile(ledger, fix=True, older_than=2 * HOUR)
    left = [u async for u in ledger.store.list_uncommitted(upload.blob_name)]
    if isinstance(ledger.store, AzureStore):  # blocks beside a committed blob: service's job
        assert report.fixed == 0 and len(left) == 1
    else:
        assert report.fixed == 1 and left == [], report
