"""Eight admin change POSTs with new files at the same moment, each in its own thread (its
own Django connection), on SQLite in a file and local disk: every one is saved, and the rows
and the store agree afterwards (docs/django.md, "SQLite: one writer at a time")."""

from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import NotSupportedError, connections, transaction
from django.test import Client

from tests.dj.conftest import atomic, backend_alias, state, stored
from tests.dj.invoices.models import Invoice
from tests.dj.test_forms import pdf

SAVES = 8


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
def test_eight_concurrent_admin_saves_all_succeed(
        backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    user = User.objects.create_superuser("admin", "a@b.c", "pw")
    invoices = [Invoice.objects.create(number=f"C-{i}", pdf=ContentFile(b"old", name="o.pdf"))
                for i in range(SAVES)]
    start = threading.Barrier(SAVES)
    answers: dict[int, int | str] = {}

    def change(invoice: Invoice) -> None:
        client = Client()
        client.force_login(user)
        start.wait()
        try:
            response = client.post(f"/admin/invoices/invoice/{invoice.pk}/change/", {
                "number": invoice.number, "pdf": pdf(b"new %d" % invoice.pk),
                "_save": "Save"})
            answers[invoice.pk] = response.status_code
        except Exception as exc:  # the test client re-raises the view's exception
            answers[invoice.pk] = repr(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=change, args=(invoice,)) for invoice in invoices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == {invoice.pk: 302 for invoice in invoices}
    for invoice in invoices:
        old = invoice.pdf.name
        invoice.refresh_from_db()
        assert invoice.pdf.read() == b"new %d" % invoice.pk
        assert state(invoice.pdf.name) == "attached" and state(old) == "deleting"
        assert stored(invoice.pdf.name)
    call_command("blobledger_check", "--json", database=backend_alias())
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True, report


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
def test_a_document_save_inside_a_transaction_says_what_to_do(backend: str) -> None:
    """A standalone save commits on the ledger's own connection: inside an ``atomic()`` on
    SQLite (whose transaction holds the one write lock) it is refused at once, with the
    advice, and the transaction and the ledger are left as they were; after the commit it
    works."""
    kept = default_storage.save("exports/kept.csv", ContentFile(b"k"))
    with atomic():
        Invoice.objects.create(number="D-1", pdf=ContentFile(b"d", name="d.pdf"))
        with pytest.raises(NotSupportedError, match="on_commit"):
            default_storage.save("exports/in.csv", ContentFile(b"a,b"))
        with pytest.raises(NotSupportedError, match="on_commit"), \
                default_storage.open("exports/w.csv", "wb") as handle:
            handle.write(b"w")
        with pytest.raises(NotSupportedError, match="on_commit"):
            default_storage.delete(kept)
        transaction.on_commit(
            lambda: default_storage.save("exports/after.csv", ContentFile(b"c,d")))
    assert Invoice.objects.filter(number="D-1").exists()
    assert not default_storage.exists("exports/in.csv")
    assert not default_storage.exists("exports/w.csv")
    assert default_storage.exists(kept)
    with default_storage.open("exports/after.csv") as handle:
        assert handle.read() == b"c,d"
    with atomic():  # reads inside a transaction go on
        assert default_storage.exists("exports/after.csv")
        assert Invoice.objects.get(number="D-1").pdf.read() == b"d"
