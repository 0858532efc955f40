"""Signed links to files: the store's own signed read URL (an Azure SAS, an S3 presigned
GET) where it can sign one, else the app's view (:mod:`blobledger.django.views`), signed
with Django's ``SECRET_KEY`` for the storage's URL lifetime (:meth:`url_lifetime`)."""

from __future__ import annotations

import posixpath
from typing import Any

from django.core import signing
from django.urls import reverse
from django.utils.http import urlencode

from blobledger.errors import NotFound

SALT = "blobledger.django.file"


def sign(name: str) -> str:
    """The signature (time and MAC) of a file name, for the view's ``s`` parameter."""
    return signing.TimestampSigner(salt=SALT).sign(name)[len(name) + 1:]


def check(name: str, signature: str, max_age: int) -> bool:
    try:
        signing.TimestampSigner(salt=SALT).unsign(f"{name}:{signature}", max_age=max_age)
    except signing.BadSignature:
        return False
    return True


def file_url(storage: Any, name: str) -> str:
    """A URL that reads the file ``name`` of a ``LedgerStorage`` for its URL lifetime."""
    ledger = storage.ledger()
    blob, filename, content_type = name, posixpath.basename(name), None
    try:
        found = ledger.attachment(name)
        filename, content_type = found.filename or filename, found.content_type
    except NotFound:
        doc = storage._document(name)
        if doc is not None:
            blob, content_type = doc.blob, doc.content_type
    signed = ledger.run(ledger.ledger.store.read_url(
        blob, expires_in=storage.url_lifetime(), filename=filename,
        content_type=content_type or "application/octet-stream"))
    if signed is not None:
        return str(signed.url)
    return reverse("blobledger:file", kwargs={"name": name}) + "?" + urlencode(
        {"s": sign(name)})
