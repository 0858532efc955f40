"""Attachments through the SQLAlchemy integration, on the four backend combinations, with
real commits: attach, read, replace, detach, owner deletion, has-many, rollback, and the
sweeper/deletion path/check after each."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from blobledger import InvalidInput, Ledger, NotFound
from blobledger.protocol.models import BlobRow
from blobledger.sqlalchemy import Attachment, StagedBlob
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.attachments.conftest import Invoice, Receipt

PDF = b"%PDF-1.7 invoice " * 1000


async def states(ledger: Ledger) -> dict[str, str]:
    async with ledger.db.session() as session:
        rows = (await session.execute(select(BlobRow.name, BlobRow.state))).all()
    return {name: state for name, state in rows}


async def read(ledger: Ledger, att: Attachment) -> bytes:
    return b"".join([chunk async for chunk in ledger.read_attachment(att)])


async def settle(ledger: Ledger) -> None:
    """The sweeper and the deletion path, with the clock past every cutoff."""
    ledger.clock_offset = ledger.settings.sweep_after + 3600
    await Sweeper(ledger).run_once()
    ledger.clock_offset += ledger.settings.delete_grace + 1
    await Sweeper(ledger).run_once()


async def test_attach_read_replace_detach_delete(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF, content_type="application/pdf", filename="inv-1.pdf")
    assert isinstance(staged, StagedBlob)
    assert (staged.size, staged.filename, staged.content_type) == \
        (len(PDF), "inv-1.pdf", "application/pdf")
    assert (await states(ledger))[staged.name] == "pending"
    with pytest.raises(NotFound):
        await ledger.attachment(staged.name)  # staged: nobody's yet

    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))
    assert (await states(ledger))[staged.name] == "attached"
    with sessions() as session:
        invoice = session.get_one(Invoice, 1)
        assert invoice.pdf == staged.plain()
        assert type(invoice.pdf) is Attachment
    assert await read(ledger, staged) == PDF
    assert (await ledger.attachment(staged.name)).sha256 == staged.sha256

    second = await ledger.stage(b"second", content_type="application/pdf")
    with sessions.begin() as session:
        session.get_one(Invoice, 1).pdf = second  # replace: the first to the outbox
    assert await states(ledger) == {staged.name: "deleting", second.name: "attached"}

    with sessions.begin() as session:
        session.get_one(Invoice, 1).pdf = None  # detach
    assert (await states(ledger))[second.name] == "deleting"
    third = await ledger.stage(b"third")
    with sessions.begin() as session:
        session.get_one(Invoice, 1).pdf = third
    with sessions.begin() as session:
        session.delete(session.get_one(Invoice, 1))  # owner deletion
    assert set((await states(ledger)).values()) == {"deleting"}

    await settle(ledger)
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


async def test_rolled_back_transaction_leaves_nothing_visible(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF)
    with sessions() as session:
        session.add(Invoice(id=2, number="INV-2", pdf=staged))
        session.flush()  # A4 ran in this transaction...
        session.rollback()  # ...and is undone with the owner's insert
    assert (await states(ledger))[staged.name] == "pending"
    with sessions() as session:
        assert session.get(Invoice, 2) is None
    with pytest.raises(NotFound):
        await ledger.attachment(staged.name)
    await settle(ledger)  # never rolled forward: fenced, then deleted
    assert await states(ledger) == {}
    assert [b async for b in ledger.store.list(ledger.settings.blob_prefix + "/")] == []
    assert (await check(ledger, settled=True)).ok


async def test_has_many(ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    a, b, c = [await ledger.stage(bytes([n]) * 100, filename=f"scan{n}.png") for n in range(3)]
    with sessions.begin() as session:
        session.add(Invoice(id=3, number="INV-3", scans=(a, b)))
    with sessions.begin() as session:
        invoice = session.get_one(Invoice, 3)
        assert [s.name for s in invoice.scans] == [a.name, b.name]
        invoice.scans = (invoice.scans[1], c)  # drop a, keep b, add c
    assert await states(ledger) == {a.name: "deleting", b.name: "attached", c.name: "attached"}
    with sessions() as session:
        scans = session.get_one(Invoice, 3).scans
    assert [await read(ledger, s) for s in scans] == [bytes([1]) * 100, bytes([2]) * 100]
    report = await check(ledger)
    assert report.ok and report.attached == 2, report.render()


async def test_a_foreign_attachment_is_refused(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    staged = await ledger.stage(PDF)
    with sessions.begin() as session:
        session.add(Invoice(id=4, number="INV-4", pdf=staged))
    with sessions() as session:
        shared = session.get_one(Invoice, 4).pdf
        session.add(Invoice(id=5, number="INV-5", pdf=shared))
        with pytest.raises(InvalidInput):
            session.commit()
        session.rollback()
        assert session.get(Invoice, 5) is None
    assert (await states(ledger))[staged.name] == "attached"


async def test_a_detached_attachment_is_refused_on_its_own_owner(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """A blob the column left (replaced: ``deleting``, its owner still on the row until the
    deletion path removes it) cannot be put back without staging it again: the column
    would name bytes the deletion path is about to take."""
    old, new = await ledger.stage(b"old pdf"), await ledger.stage(b"new pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=9, number="INV-9", pdf=old))
    with sessions.begin() as session:
        invoice = session.get_one(Invoice, 9)
        former = invoice.pdf
        invoice.pdf = new
    assert (await states(ledger))[old.name] == "deleting"
    with sessions() as session:
        session.get_one(Invoice, 9).pdf = former
        with pytest.raises(InvalidInput):
            session.commit()
        session.rollback()
        assert session.get_one(Invoice, 9).pdf == new.plain()
    assert (await states(ledger))[old.name] == "deleting"
    assert (await states(ledger))[new.name] == "attached"


async def test_async_session_on_the_ledgers_engine(ledger: Ledger) -> None:
    from sqlalchemy.ext.asyncio import async_sessionmaker

    async with ledger.db.engine.begin() as conn:
        await conn.execute(text("DROP TABLE IF EXISTS test_invoices"))
        await conn.run_sync(Invoice.metadata.create_all)
    make = async_sessionmaker(ledger.db.engine, expire_on_commit=False)
    staged = await ledger.stage(PDF)
    async with make() as session, session.begin():
        session.add(Invoice(id=6, number="INV-6", pdf=staged))
    assert (await states(ledger))[staged.name] == "attached"
    async with make() as session, session.begin():
        invoice = await session.get_one(Invoice, 6)
        await session.delete(invoice)
    assert (await states(ledger))[staged.name] == "deleting"
    await settle(ledger)
    assert (await check(ledger, settled=True)).ok



async def test_replacing_one_owners_attachment_leaves_the_others_alone(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """Two invoices, each with its PDF: replacing the first one's sends only that PDF to the
    deletion path; the second invoice's stays attached and readable after the sweep."""
    first, other = await ledger.stage(b"first pdf"), await ledger.stage(b"other pdf")
    with sessions.begin() as session:
        session.add_all([Invoice(id=1, number="INV-1", pdf=first),
                         Invoice(id=2, number="INV-2", pdf=other)])
    replacement = await ledger.stage(b"replacement pdf")
    with sessions.begin() as session:
        session.get_one(Invoice, 1).pdf = replacement
    assert await states(ledger) == {first.name: "deleting", other.name: "attached",
                                    replacement.name: "attached"}
    await settle(ledger)
    assert await states(ledger) == {other.name: "attached", replacement.name: "attached"}
    assert await read(ledger, other) == b"other pdf"
    assert (await check(ledger, settled=True)).ok


async def test_replacing_one_column_leaves_the_owners_other_column_alone(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """An invoice with a PDF and scans: replacing the PDF sends only the old PDF to the
    deletion path; the scans (another column of the same owner) stay attached."""
    pdf, scan = await ledger.stage(b"old pdf"), await ledger.stage(b"scan")
    with sessions.begin() as session:
        session.add(Invoice(id=4, number="INV-4", pdf=pdf, scans=(scan,)))
    new_pdf = await ledger.stage(b"new pdf")
    with sessions.begin() as session:
        session.get_one(Invoice, 4).pdf = new_pdf
    assert await states(ledger) == {pdf.name: "deleting", scan.name: "attached",
                                    new_pdf.name: "attached"}
    await settle(ledger)
    assert await read(ledger, scan) == b"scan"
    assert (await check(ledger, settled=True)).ok


async def test_replacing_an_attachment_leaves_another_tables_owner_alone(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """An invoice and a receipt with the same key, each with a ``pdf``: replacing the
    invoice's sends only that PDF to the deletion path; the receipt's (another owner table,
    the same key and column name) stays attached and readable after the sweep."""
    invoice_pdf, receipt_pdf = await ledger.stage(b"invoice pdf"), await ledger.stage(b"receipt")
    with sessions.begin() as session:
        session.add_all([Invoice(id=7, number="INV-7", pdf=invoice_pdf),
                         Receipt(id=7, pdf=receipt_pdf)])
    replacement = await ledger.stage(b"new invoice pdf")
    with sessions.begin() as session:
        session.get_one(Invoice, 7).pdf = replacement
    assert await states(ledger) == {invoice_pdf.name: "deleting", receipt_pdf.name: "attached",
                                    replacement.name: "attached"}
    await settle(ledger)
    assert await read(ledger, receipt_pdf) == b"receipt"
    assert (await check(ledger, settled=True)).ok


async def test_another_tables_attachment_is_refused(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """An invoice's PDF cannot be named by the receipt with the same key and column name:
    the owner is its table, key and column together."""
    staged = await ledger.stage(b"invoice pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=11, number="INV-11", pdf=staged))
    with sessions() as session:
        shared = session.get_one(Invoice, 11).pdf
        session.add(Receipt(id=11, pdf=shared))
        with pytest.raises(InvalidInput):
            session.commit()
        session.rollback()
        assert session.get(Receipt, 11) is None
    assert (await states(ledger))[staged.name] == "attached"


async def test_another_columns_attachment_is_refused(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """An invoice's PDF cannot also be one of its own scans: a blob is one column's, and
    replacing the PDF would send the scan's bytes to the deletion path."""
    staged = await ledger.stage(b"invoice pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=12, number="INV-12", pdf=staged))
    with sessions() as session:
        invoice = session.get_one(Invoice, 12)
        assert invoice.pdf is not None
        invoice.scans = (invoice.pdf,)
        with pytest.raises(InvalidInput):
            session.commit()
        session.rollback()
        assert session.get_one(Invoice, 12).scans == ()
    assert (await states(ledger))[staged.name] == "attached"


async def test_deleting_one_owner_leaves_the_other_owners_attachments_alone(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """Two invoices and a receipt with the first invoice's key, each with a PDF: deleting
    the first invoice sends only its PDF to the deletion path; the other invoice's (another
    key) and the receipt's (another owner table, the same key) stay attached and readable
    after the sweep."""
    gone, kept = await ledger.stage(b"deleted invoice"), await ledger.stage(b"kept invoice")
    receipt_pdf = await ledger.stage(b"receipt of the same key")
    with sessions.begin() as session:
        session.add_all([Invoice(id=8, number="INV-8", pdf=gone),
                         Invoice(id=9, number="INV-9", pdf=kept),
                         Receipt(id=8, pdf=receipt_pdf)])
    with sessions.begin() as session:
        session.delete(session.get_one(Invoice, 8))
    assert await states(ledger) == {gone.name: "deleting", kept.name: "attached",
                                    receipt_pdf.name: "attached"}
    await settle(ledger)
    assert await states(ledger) == {kept.name: "attached", receipt_pdf.name: "attached"}
    assert await read(ledger, kept) == b"kept invoice"
    assert await read(ledger, receipt_pdf) == b"receipt of the same key"
    assert (await check(ledger, settled=True)).ok


async def test_the_deletion_guard_keeps_a_blob_its_owner_column_still_names(
        ledger: Ledger, sessions: sessionmaker[Session]) -> None:
    """The deletion path's guard reads the owner row again: a blob row gone ``deleting`` (a
    bug, simulated) while its owner column still names the blob is refused, never deleted:
    the bytes the invoice names stay in the store."""
    staged = await ledger.stage(PDF, content_type="application/pdf", filename="kept.pdf")
    with sessions.begin() as session:
        session.add(Invoice(id=1, number="INV-1", pdf=staged))
    async with ledger.db.session() as session:
        await session.execute(text("UPDATE blobs SET state = 'deleting' WHERE name = :n"),
                              {"n": staged.name})
    ledger.clock_offset = ledger.settings.delete_grace + 3600
    report = await Sweeper(ledger).run_once()
    assert (report.refused, report.deleted) == (1, 0), report
    assert (await ledger.store.stat(staged.name)).size == len(PDF)
    assert (await states(ledger))[staged.name] == "deleting"
