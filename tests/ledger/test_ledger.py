"""The ledger on {SQLite, PostgreSQL} x {local disk, Azurite}, with real commits."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from sqlalchemy import func, select

from blobledger import (
    IdempotencyConflict,
    IdempotencyInProgress,
    IntegrityError,
    InvalidName,
    Ledger,
    NameTaken,
    NotFound,
    PreconditionFailed,
    UploadTooLarge,
)
from blobledger.errors import BlobNotFound
from blobledger.protocol.models import BlobRow, DocumentRow
from blobledger.workers.sweeper import Sweeper
from tests.conftest import EACH_DATABASE, ONE_BACKEND


async def read(ledger: Ledger, doc_id: str) -> bytes:
    return b"".join([chunk async for chunk in ledger.read(doc_id)])


async def blob_rows(ledger: Ledger) -> list[tuple[str, str, str]]:
    async with ledger.db.session() as session:
        rows = (await session.execute(select(BlobRow).order_by(BlobRow.created_at))).scalars()
        return [(r.name, r.kind, r.state) for r in rows]


async def stored(ledger: Ledger) -> dict[str, str]:
    return {info.name: (info.tags or {}).get("state", "") async for info in ledger.store.list()}


async def chunks(data: bytes, size: int = 50_000) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


async def test_create_read_replace_delete(ledger: Ledger) -> None:
    data = os.urandom(300_000)  # above the test single-put limit: staged on Azure
    doc = await ledger.create("reports/q1.PDF", chunks(data), content_type="application/pdf",
                              idempotency_key="k1")
    assert (doc.name, doc.status, doc.version, doc.size) == ("reports/q1.PDF", "ready", 1,
                                                            len(data))
    assert doc.sha256 == hashlib.sha256(data).hexdigest()
    assert doc.blob.startswith("documents/") and doc.blob.endswith(".pdf")
    assert doc.content_type == "application/pdf"
    assert await read(ledger, doc.id) == data
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await blob_rows(ledger) == [(doc.blob, "create", "committed")]

    new = await ledger.replace(doc.id, b"second", expected_version=1)
    assert (new.version, new.size, new.content_type) == (2, 6, "application/pdf")
    assert new.blob != doc.blob
    assert await read(ledger, doc.id) == b"second"
    assert await blob_rows(ledger) == [(doc.blob, "create", "deleting"),
                                       (new.blob, "replace", "committed")]
    assert (await stored(ledger))[doc.blob] == "committed"  # old bytes wait for the deletion path

    with pytest.raises(PreconditionFailed) as stale:
        await ledger.delete(doc.id, expected_version=1)
    assert stale.value.current_version == 2
    await ledger.delete(doc.id, expected_version=2)
    with pytest.raises(NotFound):
        await ledger.get(doc.id)
    assert {r[2] for r in await blob_rows(ledger)} == {"deleting"}
    assert [d async for d in ledger.list()] == []


async def test_inputs_bytes_file_and_iterables(ledger: Ledger) -> None:
    a = await ledger.create("a", b"bytes")
    b = await ledger.create("b", io.BytesIO(b"file object"))
    c = await ledger.create("c", [b"sync ", b"iterable"])
    d = await ledger.create("empty", b"")
    assert [await read(ledger, x.id) for x in (a, b, c, d)] == [
        b"bytes", b"file object", b"sync iterable", b""]
    assert d.size == 0 and d.sha256 == hashlib.sha256(b"").hexdigest()


async def test_duplicate_name_fails_before_storage(ledger: Ledger) -> None:
    await ledger.create("same", b"one")
    before = await stored(ledger)
    with pytest.raises(NameTaken):
        await ledger.create("same", b"two")
    assert await stored(ledger) == before
    assert len(await blob_rows(ledger)) == 1


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
@pytest.mark.parametrize("bad", ["", "x" * 1025, "a\x00b", "tab\there", "../up", "/root",
                                 "a/./b", "back\\slash", " padded", "\ud800"])
async def test_invalid_names_write_nothing(ledger: Ledger, bad: str) -> None:
    with pytest.raises(InvalidName):
        await ledger.create(bad, b"x")
    assert await blob_rows(ledger) == []
    assert await stored(ledger) == {}


async def test_checksum_mismatch_leaves_nothing(ledger: Ledger) -> None:
    with pytest.raises(IntegrityError):
        await ledger.create("bad", b"payload", sha256="0" * 64)
    assert await blob_rows(ledger) == []
    assert await stored(ledger) == {}
    doc = await ledger.create("bad", b"payload", sha256=hashlib.sha256(b"payload").hexdigest())
    assert doc.status == "ready"


async def test_failing_source_is_compensated(ledger: Ledger) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b"x" * 1000
        raise ConnectionResetError("client disconnected")

    with pytest.raises(ConnectionResetError):
        await ledger.create("broken", broken())
    assert await blob_rows(ledger) == []
    assert await stored(ledger) == {}
    assert (await ledger.create("broken", b"ok")).status == "ready"


async def test_upload_limit(ledger: Ledger) -> None:
    ledger.settings = ledger.settings.with_(max_upload_bytes=1000)
    with pytest.raises(UploadTooLarge):
        await ledger.create("big", b"x" * 1001)
    assert await blob_rows(ledger) == []
    assert (await ledger.create("big", b"x" * 1000)).size == 1000


async def test_idempotent_retry_returns_same_document(ledger: Ledger) -> None:
    first = await ledger.create("idem", b"same bytes", idempotency_key="key-1")
    again = await ledger.create("idem", b"same bytes", idempotency_key="key-1")
    assert again == first
    assert len(await blob_rows(ledger)) == 1
    with pytest.raises(IdempotencyConflict):
        await ledger.create("idem", b"other bytes", idempotency_key="key-1")
    with pytest.raises(IdempotencyConflict):
        await ledger.create("other-name", b"same bytes", idempotency_key="key-1")


async def test_retry_while_first_attempt_runs_is_in_progress(ledger: Ledger) -> None:
    gate = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"part one "
        await gate.wait()
        yield b"part two"

    first = asyncio.create_task(ledger.create("slow", slow(), idempotency_key="k-slow"))
    for _ in range(200):
        if await blob_rows(ledger):
            break
        await asyncio.sleep(0.01)
    with pytest.raises(IdempotencyInProgress):
        await ledger.create("slow", b"part one part two", idempotency_key="k-slow")
    gate.set()
    doc = await first
    assert await read(ledger, doc.id) == b"part one part two"
    assert await ledger.create("slow", b"part one part two", idempotency_key="k-slow") == doc


async def test_resume_after_crash_between_upload_and_commit(ledger: Ledger) -> None:
    """A retry under the same key resumes the intent: the create-only put answers
    'exists', the stored checksum equals ours, and the document becomes ready."""
    from blobledger import failpoints

    failpoints.configure("create.after_upload=raise")
    try:
        with pytest.raises(failpoints.FailpointError):
            await ledger.create("resume", b"the bytes", idempotency_key="k-resume")
    finally:
        failpoints.configure("")
    # The live failure path deleted the pending blob and rows: a retry starts afresh.
    assert await blob_rows(ledger) == []
    doc = await ledger.create("resume", b"the bytes", idempotency_key="k-resume")
    assert await read(ledger, doc.id) == b"the bytes"


async def test_resume_of_an_expired_intent_with_blob_uploaded(ledger: Ledger) -> None:
    """What a SIGKILL after C2 leaves (rows pending, blob tagged pending), resumed by key."""
    doc_name, data = "crashed", b"uploaded before the crash"
    from blobledger import failpoints

    # Leave the state of a crash after the upload: skip compensation by failing it.
    failpoints.configure("create.after_upload=raise")
    original = ledger.abandon

    async def no_compensation(intent: object) -> bool | None:
        return None

    ledger.abandon = no_compensation  # type: ignore[method-assign]
    try:
        with pytest.raises(failpoints.FailpointError):
            await ledger.create(doc_name, data, idempotency_key="k-crash")
    finally:
        failpoints.configure("")
        ledger.abandon = original  # type: ignore[method-assign]
    assert [r[2] for r in await blob_rows(ledger)] == ["pending"]
    with pytest.raises(IdempotencyInProgress):  # the lease of the dead attempt still runs
        await ledger.create(doc_name, data, idempotency_key="k-crash")
    # Past the dead attempt's lease and the sweeper's margin beyond it: a retry takes over.
    ledger.clock_offset = ledger.settings.sweep_after + 1
    with pytest.raises(IdempotencyConflict):
        await ledger.create(doc_name, b"different bytes", idempotency_key="k-crash")
    # The conflicting retry gave the intent up (its compensation removed blob and rows).
    assert await blob_rows(ledger) == []


async def test_replace_race_has_one_winner(ledger: Ledger) -> None:
    doc = await ledger.create("raced", b"v1")
    results = await asyncio.gather(
        *(ledger.replace(doc.id, f"v2 by {i}".encode(), expected_version=1) for i in range(5)),
        return_exceptions=True)
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1, results
    assert all(isinstance(r, PreconditionFailed) for r in results if isinstance(r, BaseException))
    assert await read(ledger, doc.id) == f"v2 by {results.index(winners[0])}".encode()
    # Losers rejected at R1 wrote nothing; losers rejected at R4 left a row for deletion.
    states = sorted(r[2] for r in await blob_rows(ledger))
    assert states[0] == "committed" and set(states[1:]) == {"deleting"}, states
    assert "pending" not in (await stored(ledger)).values()


async def test_a_replace_moves_only_its_own_document(ledger: Ledger) -> None:
    """Two documents at the same version: replacing one points it at the new bytes and
    leaves the other (same version, another id) on its own."""
    doc = await ledger.create("replaced", b"old bytes")
    other = await ledger.create("untouched", b"other bytes")
    new = await ledger.replace(doc.id, b"new bytes", expected_version=1)
    assert (new.id, new.version) == (doc.id, 2)
    assert await read(ledger, doc.id) == b"new bytes"
    kept = await ledger.get(other.id)
    assert (kept.version, kept.blob) == (1, other.blob)
    assert await read(ledger, other.id) == b"other bytes"


async def test_readers_never_see_pending(ledger: Ledger) -> None:
    gate = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield b"x"
        await gate.wait()

    task = asyncio.create_task(ledger.create("hidden", slow()))
    for _ in range(200):
        if await blob_rows(ledger):
            break
        await asyncio.sleep(0.01)
    async with ledger.db.session() as session:
        pending_id = (await session.execute(select(DocumentRow.id))).scalar_one()
    with pytest.raises(NotFound):
        await ledger.get(pending_id)
    assert [d async for d in ledger.list()] == []
    gate.set()
    await task
    assert [d.name async for d in ledger.list()] == ["hidden"]


@pytest.mark.parametrize("backend", EACH_DATABASE, indirect=True)
async def test_list_prefix_and_paging(ledger: Ledger) -> None:
    for name in ["b/1", "a/2", "a/1", "a_%", "c"]:
        await ledger.create(name, b"x")
    assert [d.name async for d in ledger.list()] == ["a/1", "a/2", "a_%", "b/1", "c"]
    assert [d.name async for d in ledger.list(prefix="a/")] == ["a/1", "a/2"]
    assert [d.name async for d in ledger.list(prefix="a_")] == ["a_%"]
    page = await ledger.page(limit=2)
    assert [d.name for d in page] == ["a/1", "a/2"]
    assert [d.name for d in await ledger.page(after="a/2", limit=2)] == ["a_%", "b/1"]


async def test_read_follows_a_replace_that_moved_the_blob(ledger: Ledger) -> None:
    doc = await ledger.create("moving", b"old")
    new = await ledger.replace(doc.id, b"new", expected_version=1)
    await ledger.store.set_tags(doc.blob, {"state": "deleting"})
    await ledger.store.delete(doc.blob, if_tags={"state": "deleting"})
    with pytest.raises(BlobNotFound):
        await ledger.store.stat(doc.blob)
    assert await read(ledger, new.id) == b"new"
    async with ledger.db.session() as session:
        assert (await session.execute(select(func.count()).select_from(DocumentRow))).scalar() == 1


async def test_a_name_given_after_the_upload_renames_only_its_own_key(
        ledger: Ledger) -> None:
    """A creation named after its upload, under a key, while another creation under a key
    of its own is in flight: the rename records the name on its own key only."""
    fresh = await ledger.begin_create("fresh.txt", "text/plain", "k-fresh")

    async def late() -> str:
        return "renamed.txt"

    doc = await ledger.create(None, b"named late", name_after_upload=late,
                              idempotency_key="k-renamed")
    assert doc.name == "renamed.txt"
    kept = await ledger.transitions.find_key("k-fresh")
    assert kept is not None and (kept.name, kept.blob_name) == ("fresh.txt", fresh.blob_name)


async def test_name_known_only_after_the_upload(ledger: Ledger) -> None:
    def later(name: str) -> Callable[[], Awaitable[str]]:
        async def resolve() -> str:
            return name
        return resolve

    doc = await ledger.create(None, b"named late", name_after_upload=later("late.txt"),
                              idempotency_key="k-late")
    assert (doc.name, doc.status) == ("late.txt", "ready")
    assert await ledger.create(None, b"named late", name_after_upload=later("late.txt"),
                               idempotency_key="k-late") == doc
    with pytest.raises(IdempotencyConflict):
        await ledger.create(None, b"named late", name_after_upload=later("other.txt"),
                            idempotency_key="k-late")
    with pytest.raises(NameTaken):  # found taken after the bytes: they are compensated
        await ledger.create(None, b"second", name_after_upload=later("late.txt"))
    with pytest.raises(InvalidName):
        await ledger.create(None, b"third", name_after_upload=later("../escape"))
    with pytest.raises(InvalidName):
        await ledger.create(None, b"no name at all")
    assert await blob_rows(ledger) == [(doc.blob, "create", "committed")]
    assert await stored(ledger) == {doc.blob: "committed"}
    assert [d.name async for d in ledger.list()] == ["late.txt"]


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
async def test_former_describes_a_blob_the_document_held_until_it_is_removed(
        ledger: Ledger) -> None:
    """``Ledger.former`` (a signed read URL's bytes): a blob the document points at or left
    for the deletion path, described by its own row; not another document's, not one it
    never held (a replace still pending), not one whose row is gone."""
    doc = await ledger.create("former/a.txt", b"version one", content_type="text/plain")
    other = await ledger.create("former/b.txt", b"another document")
    replaced = await ledger.replace(doc.id, b"version two!", expected_version=1)
    old = await ledger.former(doc.id, 1, doc.blob)
    assert (old.name, old.version, old.size, old.blob) == ("former/a.txt", 1, 11, doc.blob)
    assert old.sha256 == hashlib.sha256(b"version one").hexdigest()
    assert old.content_type == "text/plain"
    now = await ledger.former(doc.id, 2, replaced.blob)
    assert (now.size, now.sha256) == (12, replaced.sha256)
    with pytest.raises(NotFound):
        await ledger.former(doc.id, 1, other.blob)  # the other document's blob
    pending = await ledger.begin_replace(doc.id, 2)
    with pytest.raises(NotFound):
        await ledger.former(doc.id, 3, pending.blob_name)  # never the document's
    await ledger.delete(doc.id)
    gone = await ledger.former(doc.id, 2, replaced.blob)  # the name: the blob's own, or the id
    assert gone.name == doc.id and gone.size == 12
    ledger.clock_offset = ledger.settings.delete_grace + 600
    await Sweeper(ledger).run_once()
    with pytest.raises(NotFound):
        await ledger.former(doc.id, 1, doc.blob)
