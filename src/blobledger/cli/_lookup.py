"""A document by its name or its id, as the client commands (``show``, ``put --replace``)
find it: the service has no lookup by name, so the name is looked for in the listing
(``GET /documents?prefix=NAME&limit=1``: in name order, a name comes before every longer
name it begins), then, if no document has that name, the string is taken as an id
(``GET /documents/{id}``). What the server answers is checked
(:mod:`blobledger.client._answers`): a listed document of another name is no match, a
document of another id is refused."""

from __future__ import annotations

from typing import Any

from blobledger.cli._client import ClientError, check
from blobledger.client import Client
from blobledger.client._answers import DocumentAnswer, Page, read
from blobledger.client._core import document, document_path

#: the longest string tried as an id (the service's ids are 32 hex digits)
MAX_ID = 128


def find(client: Client, key: str) -> tuple[DocumentAnswer, Any]:
    """The ready document named ``key``, else the one whose id ``key`` is, as the model and
    the JSON value it was read from; ClientError (exit 1) when there is neither."""
    listed = client.http.get("/documents", params={"prefix": key, "limit": "1"})
    if listed.status_code != 400:  # 400: not a name the service accepts; maybe an id
        page, data = read(Page, check(listed), "a page of documents")
        if page.items and page.items[0].name == key:
            return page.items[0], data["items"][0]
    if key and len(key) <= MAX_ID and key.isprintable() and "/" not in key:
        shown = client.http.get(document_path(key))
        if shown.status_code != 404:
            doc = document(check(shown), key)
            return doc, doc.raw
    raise ClientError(f"no document is named {key!r} or has that id")
