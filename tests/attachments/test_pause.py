"""Attachments under pauses and races, in-process, on the four backend combinations: a writer
paused between stage and attach while the sweeper fences its blob, a stager paused mid-way, a
sweeper paused after its claim, an owner deleted while a replacement is staged, and two
sessions attaching to one owner at once; and the service paused at every step of a client's
direct attachment upload (SQLite + local, PostgreSQL + Azurite, PostgreSQL + S3) and tus
attachment upload (SQLite + local, PostgreSQL + Azurite) while the sweeper takes its intent.
Each ends with the settled invariants."""

from __future__ import annotations

import asyncio
import threading

import pytest
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from blobledger import IntentLost, OffsetMismatch
from blobledger.errors import AttachLost, BlobNotFound, UploadGone
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobState
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.attachments.child import upload_attachment
from tests.attachments.conftest import Invoice
from tests.attachments.test_attach import PDF, read, settle, states
from tests.crash.harness import settle as settle_all
from tests.support.holds import Holds

#: the clock past the lease and the sweep cutoff of anything staged now
STALE = 180.0 + 3600




async def sweep_at(ledger: Ledger, offset: float) -> None:
    saved = ledger.clock_offset
    ledger.clock_offset = offset
    try:
        await Sweeper(ledger).run_once()
    finally:
        ledger.clock_offset = saved


async def test_paused_between_stage_and_attach(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF)
    await sweep_at(ledger, STALE)  # the writer sleeps past the cutoff: fenced (and deleted)
    assert (await states(ledger)).get(staged.name) in (BlobState.DELETING, None)
    with sessions() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))
        with pytest.raises(AttachLost):
            session.commit()  # A4 loses: the flush, and the transaction, fail
        session.rollback()
    with sessions() as session:
        assert session.get(Invoice, 1) is None
    await settle(ledger)
    assert await states(ledger) == {}
    assert (await check(ledger, settled=True)).ok


async def test_paused_between_attach_and_commit(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF)
    session = sessions()
    session.add(Invoice(id=7, number="INV-7", pdf=staged))
    await asyncio.to_thread(session.flush)  # A4 done, the transaction still open
    sweep = asyncio.create_task(sweep_at(ledger, STALE))  # PostgreSQL: skips the locked row;
    await asyncio.sleep(0.5)  # SQLite: waits for the application's write lock
    await asyncio.to_thread(session.commit)
    await sweep
    session.close()
    assert (await states(ledger))[staged.name] == BlobState.ATTACHED
    await settle(ledger)
    assert await read(ledger, staged) == PDF
    assert (await check(ledger, settled=True)).ok


async def test_an_expired_lease_alone_does_not_stop_attach(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF)
    ledger.clock_offset = ledger.settings.upload_deadline * 2  # lease over, not yet swept
    await Sweeper(ledger).run_once()
    ledger.clock_offset = 0
    with sessions.begin() as session:
        session.add(Invoice(id=2, number="INV-2", pdf=staged))
    assert (await states(ledger))[staged.name] == BlobState.ATTACHED
    await settle(ledger)
    assert await read(ledger, staged) == PDF
    assert (await check(ledger, settled=True)).ok


@pytest.mark.parametrize("point", ["stage.after_upload", "stage.after_confirm"])
async def test_stager_paused_while_the_sweeper_takes_its_intent(
        ledger: Ledger, holds: Holds, point: str) -> None:
    holds.at(point)
    stager = asyncio.create_task(ledger.stage(PDF))
    await holds.wait(point)
    await sweep_at(ledger, STALE + ledger.settings.upload_deadline)
    await sweep_at(ledger, 2 * STALE)  # the deletion path, past its grace
    holds.go(point)
    try:
        staged = await stager
    except IntentLost:
        pass
    else:  # it woke after the fence but before the delete: its A4 must lose
        assert (await states(ledger)).get(staged.name) != BlobState.PENDING
    await settle(ledger)
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


async def test_sweeper_paused_after_its_claim(
        ledger: Ledger, sessions: sessionmaker[Session], holds: Holds) -> None:
    staged = await ledger.stage(PDF)
    holds.at("sweep.after_claim")
    sweep = asyncio.create_task(sweep_at(ledger, STALE))
    await holds.wait("sweep.after_claim")

    def attach() -> None:  # in a thread: the paused sweeper's loop must keep running
        with sessions() as session:  # the claim replaced the staging token: A4 loses
            session.add(Invoice(id=3, number="INV-3", pdf=staged))
            with pytest.raises(AttachLost):
                session.commit()
            session.rollback()

    await asyncio.to_thread(attach)
    holds.go("sweep.after_claim")
    await sweep
    await settle(ledger)
    assert await states(ledger) == {}
    assert (await check(ledger, settled=True)).ok


async def test_owner_deleted_while_a_replace_is_staged(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    first = await ledger.stage(b"first")
    with sessions.begin() as session:
        session.add(Invoice(id=4, number="INV-4", pdf=first))
    replacing = sessions()
    invoice = replacing.get_one(Invoice, 4)  # the replacing request read the owner...
    second = await ledger.stage(b"second")  # ...and staged the new bytes
    with sessions.begin() as session:  # meanwhile another request deletes the owner
        session.delete(session.get_one(Invoice, 4))
    invoice.pdf = second
    with pytest.raises(StaleDataError):
        replacing.commit()  # the owner is gone: the update, and A4 with it, never happen
    replacing.rollback()
    replacing.close()
    assert await states(ledger) == {first.name: BlobState.DELETING,
                                    second.name: BlobState.PENDING}
    await settle(ledger)
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


async def test_two_sessions_attach_to_one_owner(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        session.add(Invoice(id=5, number="INV-5"))
    one, two = await ledger.stage(b"one"), await ledger.stage(b"two")
    first_flushed = threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with sessions() as session:
            session.get_one(Invoice, 5).pdf = one
            session.flush()  # A4 and the owner's row lock held until the commit
            first_flushed.set()
            threading.Event().wait(0.5)  # the second session queues behind the lock
            session.commit()

    def second() -> None:
        first_flushed.wait(10)
        try:
            with sessions() as session:
                session.get_one(Invoice, 5).pdf = two
                session.commit()
        except Exception as exc:  # SQLite may refuse a stale snapshot: it must fail whole
            errors.append(exc)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    await asyncio.gather(*(asyncio.to_thread(t.join, 30) for t in threads))
    with sessions() as session:
        held = session.get_one(Invoice, 5).pdf
    assert held is not None
    expect = {one.name: BlobState.ATTACHED, two.name: BlobState.PENDING} if errors else \
        {one.name: BlobState.DELETING, two.name: BlobState.ATTACHED}
    assert held.name == (one.name if errors else two.name)
    assert await states(ledger) == expect
    await settle(ledger)
    report = await check(ledger, settled=True)
    assert report.ok and report.attached == 1, report.render()
    assert await read(ledger, held) == (b"one" if errors else b"two")


#: where the service pauses during a client's attachment upload, and what the upload's
#: client is told once it wakes after the sweeper took the intent (None: the completion
#: answered, its blob already fenced)
UPLOAD_PAUSES: dict[str, dict[str, tuple[type[Exception], ...] | None]] = {
    "direct": {
        "direct.after_create": (UploadGone,),
        "direct.after_upload": (UploadGone,),
        "direct.stage.after_verify": (IntentLost,),
        # the blob is deleted by then: the store's not-found (IntentLost once tag_committed
        # tells a lost intent from a missing blob)
        "direct.stage.after_confirm": (IntentLost, BlobNotFound),
        "direct.stage.after_tag": None,
        "direct.stage.after_finish": None,
    },
    "tus": {
        "tus.after_create": (UploadGone,),
        "tus.after_part": (OffsetMismatch,),  # the offset is no longer this upload's
        # swept under its completion: the upload is gone (410), not "retry" (IntentLost)
        "tus.after_publish": (UploadGone,),
        "tus.stage.after_verify": (UploadGone,),
        "tus.stage.after_confirm": (UploadGone,),
        "tus.stage.after_tag": None,
        "tus.stage.after_finish": None,
    },
}
UPLOAD_BACKENDS = {"direct": ["sqlite-local", "postgresql-azure", "postgresql-s3"],
                   "tus": ["sqlite-local", "postgresql-azure"]}


@pytest.mark.parametrize(("via", "point", "backend"), [
    pytest.param(via, point, backend, id=f"{via}-{point}-{backend}")
    for via, points in UPLOAD_PAUSES.items() for point in points
    for backend in UPLOAD_BACKENDS[via]])
async def test_upload_paused_while_the_sweeper_takes_its_intent(
        ledger: Ledger, sessions: sessionmaker[Session], holds: Holds, via: str,
        point: str) -> None:
    settings = ledger.settings
    # past the upload's own lease (until it expires) and the sweep cutoff
    late = max(settings.resumable_expiry, settings.direct_upload_expiry) + STALE
    holds.at(point)
    uploader = asyncio.create_task(upload_attachment(ledger, via))
    await holds.wait(point)
    await sweep_at(ledger, late)  # fenced
    await sweep_at(ledger, late + settings.delete_grace + 1)  # the deletion path
    assert set((await states(ledger)).values()) <= {BlobState.DELETING}
    holds.go(point)
    expected = UPLOAD_PAUSES[via][point]
    if expected is not None:
        with pytest.raises(expected):
            await uploader
    else:  # it woke after the fence: the staged blob it answered can never be attached
        staged = await uploader
        with pytest.raises(UploadGone):
            await ledger.staged_upload(staged.upload_id)
        with sessions() as session:
            session.add(Invoice(id=1, number="INV-1", pdf=staged))
            with pytest.raises(AttachLost):
                session.commit()
            session.rollback()
        with sessions() as session:
            assert session.get(Invoice, 1) is None
    ledger.clock_offset = 2 * late
    await settle_all(ledger)  # sweeper passes, then the reconciler (orphans, parts)
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok
