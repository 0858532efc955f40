"""Download links: a URL to one document's content that a browser can follow by itself (a
plain ``<a href download>``, streamed to disk with the browser's own progress), though it
cannot send the ``Authorization`` header.

A link is asked for with a read token (``GET /documents/{id}/link``) and carries, instead of
the token, ``expires`` (Unix seconds, at most :data:`LIFETIME` ahead), ``by`` (the token's
:func:`~blobledger.api.auth.owner_of` digest) and ``sig``, an HMAC-SHA256 keyed with the
token over the document's id and the expiry. It opens that document's content alone, until
it expires or its token is no longer configured; ``sig`` is redacted from access logs. With no
tokens configured the plain content URL is the link.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

#: how long a link opens its document, in seconds
LIFETIME = 120
#: the query parameters that make a request a link's
PARAMETERS = ("expires", "by", "sig")


def signature(token: str, doc_id: str, expires: int) -> str:
    message = f"blobledger-download\x00{doc_id}\x00{expires}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def link_query(token: str, owner: str, doc_id: str, now: float) -> str:
    """The query string of a link to ``doc_id``'s content, made with ``token``."""
    expires = int(now) + LIFETIME
    return urlencode({"expires": expires, "by": owner,
                      "sig": signature(token, doc_id, expires)})


def carries_link(query: Mapping[str, str]) -> bool:
    """Whether a request presents a link (rather than, or as well as, a bearer token)."""
    return "sig" in query


def link_admits(tokens: Mapping[str, frozenset[str]], owner: Callable[[str], str],
                doc_id: str, query: Mapping[str, str], now: float) -> bool:
    """Whether ``query`` is a valid, unexpired link to ``doc_id`` made with a read token
    (``owner`` names a token by its digest)."""
    try:
        expires = int(query.get("expires", ""))
    except ValueError:
        return False
    if not now <= expires <= now + LIFETIME + 1:
        return False
    by, sig = query.get("by", ""), query.get("sig", "")
    admitted = False
    for token, scopes in tokens.items():
        if "read" in scopes and hmac.compare_digest(owner(token), by):
            admitted |= hmac.compare_digest(signature(token, doc_id, expires), sig)
    return admitted
