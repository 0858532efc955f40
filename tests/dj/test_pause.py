"""A save paused while the sweeper runs ahead: between the staging and the row's
transaction (the sweeper fences the staged blob: the save fails, nothing is visible), and
on PostgreSQL between A4 and the commit (the sweeper's claim skips the locked row: the
commit attaches)."""

from __future__ import annotations

import threading

import pytest
from django.core.files.base import ContentFile

from blobledger.errors import AttachLost
from tests.dj.conftest import atomic, state, stored, sweep
from tests.dj.invoices.models import Invoice

HOUR = 3600.0


def test_paused_between_the_staging_and_the_save(backend: str) -> None:
    invoice = Invoice(number="P-1")
    invoice.pdf.save("p.pdf", ContentFile(b"paused"), save=False)  # staged (A1-A3)
    name = invoice.pdf.name
    sweep(HOUR)  # the sweeper of a process an hour ahead fences it
    with pytest.raises(AttachLost):
        invoice.save()
    assert not Invoice.objects.exists()
    sweep(2 * HOUR)
    assert state(name) is None and not stored(name)


@pytest.mark.parametrize("backend", ["postgresql-azure"], indirect=True)
def test_paused_between_the_attach_and_the_commit(backend: str) -> None:
    attached, resume = threading.Event(), threading.Event()
    names: list[str] = []

    def save() -> None:
        from django.db import connections

        try:
            with atomic():
                invoice = Invoice.objects.create(number="P-2",
                                                 pdf=ContentFile(b"held", name="h.pdf"))
                names.append(str(invoice.pdf.name))
                attached.set()
                resume.wait(60)
        finally:
            connections.close_all()

    saver = threading.Thread(target=save)
    saver.start()
    assert attached.wait(60)
    report = sweep(3 * HOUR)  # claims stale pending rows: this one is locked, skipped
    resume.set()
    saver.join(60)
    assert report.errors == 0
    assert state(names[0]) == "attached" and stored(names[0])
    assert Invoice.objects.get(number="P-2").pdf.read() == b"held"
