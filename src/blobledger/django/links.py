"""Signed links to files: the store's own signed read URL (an Azure SAS, an S3 presigned
GET) where it can sign one, else the app's view (:mod:`blobledger.django.views`), signed
with Django's ``SECRET_KEY`` for the storage's URL lifetime (:meth:`url_lifetime`). Like a
store's signed URL, the view's link opens the bytes it was signed for or nothing: it signs
the file's name with the blob that held it (a later file under that name is another
blob)."""

from __future__ import annotations

import posixpath
from typing import Any

from django.core import signing
from django.core.files.storage import storages
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.utils.encoding import iri_to_uri
from django.utils.http import urlencode

from blobledger.errors import ConfigError, NotFound

SALT = "blobledger.django.file"


def _value(name: str, blob: str) -> str:
    """What a link signs: the file's name and the blob that holds its bytes when signed
    (write-once: a replace, or a delete then a save under the name, makes another)."""
    return f"{name}\n{blob}"


def sign(name: str, blob: str) -> str:
    """The signature (time and MAC) of a file name and its blob, for the view's ``s``."""
    value = _value(name, blob)
    return signing.TimestampSigner(salt=SALT).sign(value)[len(value) + 1:]


def check(name: str, blob: str, signature: str, max_age: int) -> bool:
    """Whether ``signature`` was made by :func:`sign` for exactly this name and blob, within
    ``max_age`` seconds (a tail of the signed value that moved into ``signature`` fails)."""
    value = _value(name, blob)
    try:
        signed = signing.TimestampSigner(salt=SALT).unsign(f"{value}:{signature}",
                                                           max_age=max_age)
    except signing.BadSignature:
        return False
    return constant_time_compare(signed, value)


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
        {"s": sign(name, blob)})


def storage_alias(storage: Any) -> str | None:
    """The ``STORAGES`` key of ``storage`` (None for a storage built elsewhere)."""
    for alias in dict(storages.backends):
        if storages[alias] is storage:
            return str(alias)
    return None


def public_url(storage: Any, name: str) -> str:
    """A public storage's URL by name, unsigned and without expiry: its ``base_url`` and the
    name, else the app's public view for its ``STORAGES`` key."""
    if storage.base_url is not None:
        return iri_to_uri(f"{storage.base_url}{name.lstrip('/')}")
    alias = storage_alias(storage)
    if alias is None:
        raise ConfigError("a public LedgerStorage outside STORAGES needs a base_url")
    return str(reverse("blobledger:public", kwargs={"storage": alias, "name": name}))
