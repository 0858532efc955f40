"""Uploads the way Django applications make them: a model form behind a view, and the
admin (add, replace, clear), through Django's test client."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.dj.conftest import EVERY_BACKEND, backend_alias, state, stored, sweep, tag
from tests.dj.invoices.models import Invoice

HOUR = 3600.0


def pdf(data: bytes, name: str = "inv.pdf") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/pdf")


@EVERY_BACKEND
def test_a_model_form_upload(backend: str) -> None:
    response = Client().post("/upload/", {"number": "F-1", "pdf": pdf(b"%PDF form")})
    assert response.status_code == 201, response.content
    name = response.content.decode()
    assert state(name) == "attached"
    invoice = Invoice.objects.get(number="F-1")
    assert invoice.pdf.name == name and invoice.pdf.read() == b"%PDF form"


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
def test_a_refused_form_stages_nothing(backend: str) -> None:
    response = Client().post("/upload/", {"number": "", "pdf": pdf(b"%PDF form")})
    assert response.status_code == 400
    assert not Invoice.objects.exists()


def _admin(backend: str) -> Client:
    user = User.objects.db_manager(backend_alias()).create_superuser("admin", "a@b.c", "pw")
    client = Client()
    client.force_login(user)
    return client


@EVERY_BACKEND
def test_the_admin_adds_and_links(backend: str) -> None:
    client = _admin(backend)
    added = client.post("/admin/invoices/invoice/add/", {
        "number": "A-1", "pdf": pdf(b"first"), "_save": "Save"})
    assert added.status_code == 302, added.content.decode()[-2000:]
    invoice = Invoice.objects.get(number="A-1")
    assert state(invoice.pdf.name) == "attached"
    page = client.get(f"/admin/invoices/invoice/{invoice.pk}/change/")
    assert page.status_code == 200
    link = re.search(r'href="([^"]+)">' + re.escape(str(invoice.pdf.name)), page.content.decode())
    assert link is not None, "the admin links the current file"
    url = link.group(1).replace("&amp;", "&")
    body = client.get(url).getvalue() if url.startswith("/") else b"signed:" + url.encode()
    assert body == b"first" if backend.startswith("sqlite") else body.startswith(b"signed:")


@EVERY_BACKEND
def test_the_admin_replaces_and_clears(backend: str) -> None:
    """The change view reads the row inside its transaction before the new file stages: on
    SQLite the staging then runs on Django's connection (docs/django.md)."""
    client = _admin(backend)
    invoice = Invoice.objects.create(number="A-2", pdf=pdf(b"first"), scan=pdf(b"s", "s.png"))
    first, scan = invoice.pdf.name, invoice.scan.name
    changed = client.post(f"/admin/invoices/invoice/{invoice.pk}/change/", {
        "number": "A-2", "pdf": pdf(b"second"), "scan-clear": "on", "_save": "Save"})
    assert changed.status_code == 302, changed.content.decode()[-2000:]
    invoice.refresh_from_db()
    assert invoice.pdf.read() == b"second" and not invoice.scan
    assert state(first) == "deleting" and state(scan) == "deleting"
    assert state(invoice.pdf.name) == "attached" and tag(invoice.pdf.name) == "committed"
    sweep(HOUR)
    assert not stored(first) and not stored(scan) and stored(invoice.pdf.name)
