"""The view's signed links on local disk open the bytes they were signed for, or nothing
(as a store's signed URL does), and only the name they were signed for."""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlsplit

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client

from blobledger.django.links import check, sign
from tests.dj.invoices.models import Invoice

ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


@ON_DISK
def test_an_old_link_never_opens_a_later_document_of_its_name(backend: str) -> None:
    name = default_storage.save("reports/q3.txt", ContentFile(b"first"))
    old = default_storage.url(name)
    client = Client()
    assert client.get(old).getvalue() == b"first"
    default_storage.delete(name)
    again = default_storage.save("reports/q3.txt", ContentFile(b"second"))
    assert again == name  # the name is free again
    assert client.get(old).status_code == 404
    assert client.get(default_storage.url(name)).getvalue() == b"second"


@ON_DISK
def test_an_old_link_never_opens_a_replaced_documents_new_bytes(backend: str) -> None:
    name = default_storage.save("reports/q4.txt", ContentFile(b"first"))
    old = default_storage.url(name)
    with default_storage.open(name, "wb") as handle:  # replaced in place
        handle.write(b"second")
    client = Client()
    assert client.get(old).status_code == 404
    assert client.get(default_storage.url(name)).getvalue() == b"second"


@ON_DISK
def test_an_old_link_never_opens_an_attachment_saved_under_its_name(backend: str) -> None:
    invoice = Invoice.objects.create(number="L-1", pdf=ContentFile(b"mine", name="m.pdf"))
    name = str(invoice.pdf.name)
    old = invoice.pdf.url
    invoice.delete()
    default_storage.save(name, ContentFile(b"theirs"))  # a document under the freed name
    assert Client().get(old).status_code == 404


@ON_DISK
def test_a_link_opens_only_the_name_it_was_signed_for(backend: str) -> None:
    mine = default_storage.save("reports/q3.pdf:mine", ContentFile(b"mine"))
    default_storage.save("reports/q3.pdf", ContentFile(b"theirs"))
    link = urlsplit(default_storage.url(mine))
    signature = parse_qs(link.query)["s"][0]
    client = Client()
    assert client.get(link.path, {"s": signature}).getvalue() == b"mine"
    tail = mine.rsplit(":", 1)[1]
    moved = f"/files/{quote('reports/q3.pdf')}"
    assert client.get(moved, {"s": f"{tail}:{signature}"}).status_code == 404
    assert client.get(moved, {"s": sign("reports/q3.pdf:mine", "x")}).status_code == 404


def test_a_signature_checks_the_whole_value_it_unsigns() -> None:
    """A tail of the signed value moved into the signature is refused (the signer alone
    would accept it: it splits the value from the signature at the last separators)."""
    signature = sign("reports/q3.pdf", "blob:mine")
    assert check("reports/q3.pdf", "blob:mine", signature, 60)
    assert not check("reports/q3.pdf", "blob", f"mine:{signature}", 60)
