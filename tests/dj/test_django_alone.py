"""What Django alone leaves behind under the failures the ledger resolves (the numbers of
docs/django.md): a ``FileField`` on Django's own ``FileSystemStorage``."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile

from tests.dj.conftest import atomic, reconcile_fix, state, stored, tag
from tests.dj.invoices.models import MEDIA, Invoice, PlainInvoice

ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


class Boom(Exception):
    pass


def files() -> set[str]:
    return {str(p.relative_to(MEDIA)) for p in MEDIA.rglob("*") if p.is_file()}


@ON_DISK
def test_a_rolled_back_save_leaves_an_orphan_file(backend: str) -> None:
    before = files()
    with pytest.raises(Boom), atomic():
        PlainInvoice.objects.create(number="P-1", pdf=ContentFile(b"x", name="x.pdf"))
        raise Boom
    assert not PlainInvoice.objects.exists()
    assert len(files() - before) == 1  # Django alone: a file nothing references, forever
    with pytest.raises(Boom), atomic():
        lost = Invoice.objects.create(number="L-1", pdf=ContentFile(b"x", name="x.pdf"))
        raise Boom
    # the ledger on SQLite: staged inside the transaction, so no row; the bytes, tagged
    # pending, go with reconcile --fix past their age
    assert state(lost.pdf.name) is None and tag(lost.pdf.name) == "pending"
    assert reconcile_fix(3600).fixed == 1 and not stored(lost.pdf.name)


@ON_DISK
def test_a_replaced_or_deleted_owner_leaves_its_file(backend: str) -> None:
    invoice = PlainInvoice.objects.create(number="P-2", pdf=ContentFile(b"1", name="a.pdf"))
    first = str(invoice.pdf.name)
    invoice.pdf = ContentFile(b"2", name="b.pdf")
    invoice.save()
    second = str(invoice.pdf.name)
    invoice.delete()
    assert {first, second} <= files()  # Django alone: both stay, no row names them
