"""Download links: a URL to one document's content that a browser can follow by itself (a
plain ``<a href download>``, streamed to disk with the browser's own progress), though it
cannot send the ``Authorization`` header.

A link is asked for with a read token (``GET /documents/{id}/link``) and carries, instead of
the token, ``expires`` (Unix seconds, at most :data:`LIFETIME` ahead), ``by`` (the token's
:func:`~blobledger.api.auth.owner_of` digest) and ``sig``, an HMAC-SHA256 keyed with the
token over the document's id and the expiry. It opens that document's content alone, until
it expires or its token is no longer configured; ``sig`` is redacted from access logs. With no
tokens configured the plain content URL is the link.

A signed read URL of one version (:mod:`blobledger.api.routes.reads`, on local disk) is such a
link to ``/documents/{id}/versions/{v}/content`` that also names the blob it was made for
(``blob``), signed over the id, the version, the blob and the expiry, and may live as long as
a signed read URL does (:func:`~blobledger.config.read_url_lifetime`, within the deletion
grace): it opens those bytes until it expires, even once the document was replaced or
deleted (the grace keeps them). With no tokens configured it carries ``blob`` and ``expires``
unsigned: there is no key to sign with, and no credential to keep.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from urllib.parse import urlencode

#: how long a link opens its document, in seconds
LIFETIME = 120
#: the query parameters that make a request a link's
PARAMETERS = ("expires", "by", "sig", "blob")


def signature(token: str, doc_id: str, expires: int, version: str | None = None,
              blob: str | None = None) -> str:
    """The HMAC of a link (with ``blob``: of one version's blob)."""
    message = (f"blobledger-download\x00{doc_id}\x00{expires}" if blob is None else
               f"blobledger-read\x00{doc_id}\x00{version}\x00{blob}\x00{expires}")
    return hmac.new(token.encode(), message.encode(), hashlib.sha256).hexdigest()


def link_query(token: str, owner: str, doc_id: str, now: float) -> str:
    """The query string of a link to ``doc_id``'s content, made with ``token``."""
    expires = int(now) + LIFETIME
    return urlencode({"expires": expires, "by": owner,
                      "sig": signature(token, doc_id, expires)})


def version_query(token: str | None, owner: str | None, doc_id: str, version: int,
                  blob: str, expires: int) -> str:
    """The query string of a signed read URL of ``doc_id`` at ``version``, whose bytes are
    ``blob``, until ``expires`` (Unix seconds); unsigned without a token."""
    query: dict[str, str | int] = {"blob": blob, "expires": expires}
    if token is not None and owner is not None:
        query |= {"by": owner, "sig": signature(token, doc_id, expires, str(version), blob)}
    return urlencode(query)


def blob_named(query: Mapping[str, str], now: float, lifetime: float) -> str | None:
    """The blob a read URL names, if it names one and has not expired (nor claims to live
    longer than ``lifetime``); its signature is :func:`link_admits`'s to check."""
    blob = query.get("blob")
    try:
        expires = int(query.get("expires", ""))
    except ValueError:
        return None
    if blob and lifetime > 0 and now <= expires <= now + lifetime + 1:
        return blob
    return None


def carries_link(query: Mapping[str, str]) -> bool:
    """Whether a request presents a link (rather than, or as well as, a bearer token)."""
    return "sig" in query


def link_admits(tokens: Mapping[str, frozenset[str]], owner: Callable[[str], str],
                doc_id: str, query: Mapping[str, str], now: float,
                version: str | None = None, lifetime: float = LIFETIME) -> bool:
    """Whether ``query`` is a valid, unexpired link to ``doc_id`` made with a read token
    (``owner`` names a token by its digest): a download link, or a read URL of ``version``
    naming its blob, which may live ``lifetime`` seconds."""
    blob = query.get("blob")
    if blob is not None and (version is None or blob_named(query, now, lifetime) is None):
        return False
    try:
        expires = int(query.get("expires", ""))
    except ValueError:
        return False
    if blob is None and not now <= expires <= now + LIFETIME + 1:
        return False
    by, sig = query.get("by", ""), query.get("sig", "")
    admitted = False
    for token, scopes in tokens.items():
        if "read" in scopes and hmac.compare_digest(owner(token), by):
            admitted |= hmac.compare_digest(signature(token, doc_id, expires, version, blob),
                                            sig)
    return admitted
