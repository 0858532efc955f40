"""``url()`` for every backend: the store's own signed read URL (an Azure SAS, an S3
presigned GET) where it can sign one, else this app's view, signed with Django's
``SECRET_KEY`` for the storage's ``url_expiry``:

    urlpatterns = [..., path("files/", include("blobledger.django.urls"))]
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from django.core import signing
from django.urls import path, reverse
from django.utils.http import urlencode

from blobledger.django import views
from blobledger.errors import NotFound

if TYPE_CHECKING:
    from blobledger.django.storage import LedgerStorage

SALT = "blobledger.django.file"
app_name = "blobledger"
urlpatterns = [path("<path:name>", views.serve, name="file")]


def sign(name: str) -> str:
    """The signature (time and MAC) of a file name, for the view's ``s`` parameter."""
    return signing.TimestampSigner(salt=SALT).sign(name)[len(name) + 1:]


def check(name: str, signature: str, max_age: int) -> bool:
    try:
        signing.TimestampSigner(salt=SALT).unsign(f"{name}:{signature}", max_age=max_age)
    except signing.BadSignature:
        return False
    return True


def file_url(storage: LedgerStorage, name: str) -> str:
    """A URL that reads the file ``name`` for ``storage.url_expiry`` seconds."""
    ledger = storage.ledger()
    blob, filename = name, posixpath.basename(name)
    try:
        filename = ledger.attachment(name).filename or filename
    except NotFound:
        doc = storage._document(name)
        if doc is not None:
            blob = doc.blob
    signed = ledger.run(ledger.ledger.store.direct_get(
        blob, expires_in=storage.url_expiry, filename=filename))
    if signed is not None:
        return signed
    return reverse("blobledger:file", kwargs={"name": name}) + "?" + urlencode(
        {"s": sign(name)})
