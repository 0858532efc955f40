"""A FileField on the ledger: the attach (A4) and the detach run in the row's transaction,
on Django's connection, on SQLite + disk, PostgreSQL + Azurite and PostgreSQL + S3."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile
from django.db import connections

from tests.dj.conftest import (
    EVERY_BACKEND,
    atomic,
    backend_alias,
    on_sqlite,
    reconcile_fix,
    state,
    storage,
    stored,
    sweep,
    tag,
)
from tests.dj.invoices.models import Customer, Invoice

HOUR = 3600.0


class Boom(Exception):
    pass


@EVERY_BACKEND
def test_a_saved_file_is_attached(backend: str) -> None:
    invoice = Invoice.objects.create(number="INV-1", pdf=ContentFile(b"%PDF-1", name="a b.pdf"))
    name = str(invoice.pdf.name)
    assert name.startswith("documents/invoices/") and name.endswith(".pdf")
    assert state(name) == "attached"
    again = Invoice.objects.get(pk=invoice.pk)
    with again.pdf.open("rb") as handle:
        assert handle.read() == b"%PDF-1"
    assert again.pdf.size == 6
    assert storage().ledger(backend_alias()).attachment(name).filename == "a b.pdf"


@EVERY_BACKEND
def test_a_rolled_back_atomic_leaves_nothing_visible(backend: str) -> None:
    with pytest.raises(Boom), atomic():
        invoice = Invoice.objects.create(number="INV-2", pdf=ContentFile(b"x", name="x.pdf"))
        name = str(invoice.pdf.name)
        assert state(name) is not None
        raise Boom
    assert not Invoice.objects.exists()
    if on_sqlite(backend):  # staged inside the transaction: its row went with it
        assert state(name) is None and stored(name) and tag(name) == "pending"
        assert reconcile_fix(0).fixed == 0  # not before its age
        assert reconcile_fix(HOUR).fixed == 1  # an orphan tagged pending
        assert not stored(name)
        return
    assert state(name) == "pending" and stored(name)  # staged, never attached
    sweep(0)
    assert state(name) == "pending"  # not before its age
    sweep(HOUR)  # fenced
    sweep(2 * HOUR)  # and deleted by the deletion path
    assert state(name) is None and not stored(name)


def test_a_rolled_back_savepoint_rolls_its_attach_back(backend: str) -> None:
    with atomic():
        with pytest.raises(Boom), atomic():
            lost = Invoice.objects.create(number="INV-4", pdf=ContentFile(b"l", name="l.pdf"))
            assert state(lost.pdf.name) is not None
            raise Boom
        Customer.objects.create(name="kept")
    assert Customer.objects.filter(name="kept").exists() and not Invoice.objects.exists()
    if on_sqlite(backend):
        assert state(lost.pdf.name) is None and tag(lost.pdf.name) == "pending"
        assert reconcile_fix(HOUR).fixed == 1
    else:
        assert state(lost.pdf.name) == "pending"
        sweep(HOUR)
        sweep(2 * HOUR)
    assert state(lost.pdf.name) is None and not stored(lost.pdf.name)


def test_files_saved_after_other_writes_of_one_transaction(backend: str) -> None:
    """A file field may stage anywhere in a transaction (on SQLite too: there it stages on
    Django's connection, so its row goes with a rolled-back savepoint)."""
    with atomic():
        kept = Invoice.objects.create(number="INV-3", pdf=ContentFile(b"k", name="k.pdf"))
        with pytest.raises(Boom), atomic():
            lost = Invoice.objects.create(number="INV-4", pdf=ContentFile(b"l", name="l.pdf"))
            raise Boom
        also = Invoice.objects.create(number="INV-5", pdf=ContentFile(b"a", name="a.pdf"))
    assert sorted(Invoice.objects.values_list("number", flat=True)) == ["INV-3", "INV-5"]
    assert [state(kept.pdf.name), state(lost.pdf.name), state(also.pdf.name)] == [
        "attached", None if on_sqlite(backend) else "pending", "attached"]
    assert tag(kept.pdf.name) == tag(also.pdf.name) == "committed"


def test_a_replaced_file_goes_only_after_commit_and_grace(backend: str) -> None:
    invoice = Invoice.objects.create(number="INV-5", pdf=ContentFile(b"old", name="o.pdf"))
    old = invoice.pdf.name
    with atomic():
        invoice.pdf = ContentFile(b"new", name="n.pdf")
        invoice.save()
        new = invoice.pdf.name
        if not backend.startswith("sqlite"):  # (SQLite's sweeper waits for the commit)
            sweep(2 * HOUR)  # a sweeper running meanwhile does not see the detach
            assert stored(old)
    assert state(old) == "deleting" and state(new) == "attached"
    sweep(0)
    assert stored(old)  # within the grace
    sweep(HOUR)
    assert state(old) is None and not stored(old)
    assert Invoice.objects.get(pk=invoice.pk).pdf.read() == b"new"


def test_a_rolled_back_replace_keeps_the_old_file(backend: str) -> None:
    invoice = Invoice.objects.create(number="INV-6", pdf=ContentFile(b"old", name="o.pdf"))
    old = invoice.pdf.name
    with pytest.raises(Boom), atomic():
        invoice.pdf = ContentFile(b"new", name="n.pdf")
        invoice.save()
        raise Boom
    assert state(old) == "attached"
    assert Invoice.objects.get(pk=invoice.pk).pdf.name == old


def test_clearing_a_field_detaches(backend: str) -> None:
    invoice = Invoice.objects.create(number="INV-7", pdf=ContentFile(b"p", name="p.pdf"),
                                     scan=ContentFile(b"s", name="s.png"))
    scan = invoice.scan.name
    invoice.scan.delete()  # clears the field and saves: the blob to the outbox
    assert state(scan) == "deleting" and stored(scan)
    assert state(invoice.pdf.name) == "attached"
    sweep(HOUR)
    assert not stored(scan)


def test_a_cascade_delete_detaches(backend: str) -> None:
    customer = Customer.objects.create(name="ACME")
    names = [Invoice.objects.create(number=f"C-{i}", customer=customer,
                                    pdf=ContentFile(b"c", name="c.pdf")).pdf.name
             for i in range(2)]
    with pytest.raises(Boom), atomic():
        customer.delete()
        raise Boom
    assert [state(n) for n in names] == ["attached", "attached"]
    Customer.objects.get(name="ACME").delete()  # (Django cleared the pk on rollback)
    assert [state(n) for n in names] == ["deleting", "deleting"]
    sweep(HOUR)
    assert not any(stored(n) for n in names)


def test_a_queryset_delete_detaches(backend: str) -> None:
    names = [Invoice.objects.create(number=f"Q-{i}", pdf=ContentFile(b"q", name="q.pdf"))
             .pdf.name for i in range(3)]
    Invoice.objects.filter(number__in=["Q-0", "Q-1"]).delete()
    assert [state(n) for n in names] == ["deleting", "deleting", "attached"]


def test_a_file_is_never_shared(backend: str) -> None:
    first = Invoice.objects.create(number="S-1", pdf=ContentFile(b"s", name="s.pdf"))
    from blobledger.errors import InvalidInput

    with pytest.raises(InvalidInput):
        Invoice.objects.create(number="S-2", pdf=first.pdf.name)
    assert Invoice.objects.count() == 1


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
def test_with_debug_cursors(backend: str) -> None:
    """DEBUG's cursors format each statement with its parameters: the ledger's SQL holds no
    stray percent sign."""
    from django.db import connections
    from django.test import override_settings

    with override_settings(DEBUG=True):
        invoice = Invoice.objects.create(number="D-1", pdf=ContentFile(b"d", name="d.pdf"))
        logged = [q["sql"] for q in connections[backend_alias()].queries]
    assert state(invoice.pdf.name) == "attached"
    assert any("UPDATE blobs" in sql for sql in logged)


def events_of(name: str | None) -> list[str]:
    """The types of a blob's events, in order, on the current database."""
    assert name
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT type FROM events WHERE subject = %s ORDER BY id", [name])
        return [str(row[0]) for row in cursor.fetchall()]


def test_the_attachment_events_commit_with_the_row(backend: str) -> None:
    """A4 and the detach write their events on Django's connection, in the row's
    transaction: a rolled-back save leaves none, a replace one of each, a delete its
    detach."""
    with pytest.raises(Boom), atomic():
        lost = Invoice.objects.create(number="INV-8", pdf=ContentFile(b"l", name="l.pdf"))
        assert events_of(lost.pdf.name) == ["attachment.attached"]
        raise Boom
    assert events_of(lost.pdf.name) == []
    invoice = Invoice.objects.create(number="INV-9", pdf=ContentFile(b"o", name="o.pdf"))
    first = invoice.pdf.name
    invoice.pdf = ContentFile(b"n", name="n.pdf")
    invoice.save()
    second = invoice.pdf.name
    invoice.delete()
    assert events_of(first) == ["attachment.attached", "attachment.detached"]
    assert events_of(second) == ["attachment.attached", "attachment.detached"]
