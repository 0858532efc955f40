"""A typed client for the blobledger service, on httpx: :class:`Client` (blocking) and
:class:`AsyncClient`, one implementation (:mod:`._core`) run by each.

    from blobledger.client import Client

    with Client("http://127.0.0.1:8000", token="...") as client:
        doc = client.create("notes.txt", b"hello", content_type="text/plain")
        client.replace(doc.id, b"hello again", if_match=doc.version)
        print(client.read(doc.id))

The server is not trusted: every answer is checked (:mod:`._answers`); an error answer is
raised as blobledger's own exception (:mod:`blobledger.errors`), a body that is not what
was asked for as :class:`BadAnswer`. Retries: what says retry (a connection failure, a 5xx,
a 429/503/409 with ``Retry-After``), and nothing else (:mod:`._core`).
"""

from blobledger.client._answers import BadAnswer, Link, Page, ReadURL
from blobledger.client._answers import DocumentAnswer as DocumentInfo
from blobledger.client._async import AsyncClient, AsyncReading
from blobledger.client._direct import NoDirectUploads, Refused, StoreFailed
from blobledger.client._retry import Retried
from blobledger.client._sync import Client, Reading

__all__ = ["AsyncClient", "AsyncReading", "BadAnswer", "Client", "DocumentInfo", "Link",
           "NoDirectUploads", "Page", "ReadURL", "Reading", "Refused", "Retried",
           "StoreFailed"]
