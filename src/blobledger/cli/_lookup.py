"""A document by its name or its id, as the client commands (``show``, ``put --replace``)
find it: the service has no lookup by name, so the name is looked for in the listing
(:meth:`~blobledger.client.Client.pages`, its first page of one: ``GET
/documents?prefix=NAME&limit=1``; in name order, a name comes before every longer name it
begins), then, if no document has that name, the string is taken as an id
(:meth:`~blobledger.client.Client.get`). What the server answers is checked by the client
(:mod:`blobledger.client._answers`): a listed document of another name is no match, a
document of another id is refused."""

from __future__ import annotations

from typing import Any

from blobledger.cli._client import ClientError
from blobledger.client import Client
from blobledger.client._answers import DocumentAnswer
from blobledger.errors import BlobLedgerError, InvalidInput, NotFound, ServiceError

#: the longest string tried as an id (the service's ids are 32 hex digits)
MAX_ID = 128


def find(client: Client, key: str) -> tuple[DocumentAnswer, Any]:
    """The ready document named ``key``, else the one whose id ``key`` is, as the model and
    the JSON value it was read from; ClientError (exit 1) when there is neither."""
    try:
        page = next(client.pages(key, page_size=1))  # the first page only
    except BlobLedgerError as exc:
        if not _answered(exc, 400, InvalidInput):  # not a name the service takes; an id?
            raise
    else:
        if page.items and page.items[0].name == key:
            return page.items[0], page.items[0].raw
    if key and len(key) <= MAX_ID and key.isprintable() and "/" not in key:
        try:
            doc = client.get(key)
        except BlobLedgerError as exc:
            if not _answered(exc, 404, NotFound):
                raise
        else:
            return doc, doc.raw
    raise ClientError(f"no document is named {key!r} or has that id")


def _answered(exc: BlobLedgerError, status: int, kind: type[BlobLedgerError]) -> bool:
    """Whether ``exc`` is the client's error for an answer of ``status``: exactly ``kind``
    (not a narrower one: a rejected document's 410 is an ``UploadGone``, told as it is),
    or a ServiceError of that status."""
    return type(exc) is kind or (isinstance(exc, ServiceError) and exc.status == status)
