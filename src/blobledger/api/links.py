"""Download links and the service's own read URLs: URLs to one document's content that a
browser can follow by itself (a plain ``<a href download>``, streamed to disk with the
browser's own progress), though it cannot send the ``Authorization`` header.

Every such URL is signed with the service's **signing key**
(:meth:`~blobledger.protocol.ledger.Ledger.signing_key`: ``BLOBLEDGER_SIGNING_KEY``, else
one generated once and kept in the database), which no client ever holds: a caller can
present a URL the service made, never make one. A token is never a key.

A **download link** is asked for with a read token (``GET /documents/{id}/link``) and
carries, instead of the token, ``expires`` (Unix seconds, at most :data:`LIFETIME` ahead),
``by`` (the token's :func:`~blobledger.api.auth.owner_of` digest) and ``sig``, an
HMAC-SHA256 over the document's id, ``by`` and the expiry. It opens that document's current
content alone (a ready document: what the token itself may read), until it expires or its
token is no longer configured; ``sig`` is redacted from access logs. With no tokens
configured the plain content URL is the link.

A **signed read URL** of one version (:mod:`blobledger.api.routes.reads`, on local disk) is
a URL of ``/documents/{id}/versions/{v}/content`` that also names the blob it was made for
(``blob``), signed over the id, the version, the blob, ``by`` and the expiry, and may live as
long as a signed read URL does (:func:`~blobledger.config.read_url_lifetime`, within the
deletion grace): it opens those bytes until it expires, even once the document was replaced
or deleted (the grace keeps them). It is signed whether or not tokens are configured
(without tokens ``by`` is empty): a query that names a blob is served only with the
signature the service made for that blob, that version and that expiry
(:func:`signed_blob`), so the service alone decides which blob, at which version, a URL
opens, and it signs only a ready document's current one.
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


def signature(key: bytes, doc_id: str, by: str, expires: int, version: str | None = None,
              blob: str | None = None) -> str:
    """The HMAC of a download link (with ``blob``: of a read URL of one version's blob)."""
    message = (f"blobledger-download\x00{doc_id}\x00{by}\x00{expires}" if blob is None else
               f"blobledger-read\x00{doc_id}\x00{version}\x00{blob}\x00{by}\x00{expires}")
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def link_query(key: bytes, owner: str, doc_id: str, now: float) -> str:
    """The query string of a download link to ``doc_id``'s content, for the token whose
    digest is ``owner``."""
    expires = int(now) + LIFETIME
    return urlencode({"expires": expires, "by": owner,
                      "sig": signature(key, doc_id, owner, expires)})


def version_query(key: bytes, owner: str | None, doc_id: str, version: int, blob: str,
                  expires: int) -> str:
    """The query string of a signed read URL of ``doc_id`` at ``version``, whose bytes are
    ``blob``, until ``expires`` (Unix seconds); ``owner`` None without tokens."""
    query: dict[str, str | int] = {"blob": blob, "expires": expires}
    if owner is not None:
        query["by"] = owner
    query["sig"] = signature(key, doc_id, owner or "", expires, str(version), blob)
    return urlencode(query)


def _expiry(query: Mapping[str, str], now: float, lifetime: float) -> int | None:
    """The query's ``expires`` if it has not passed and lies within ``lifetime``."""
    try:
        expires = int(query.get("expires", ""))
    except ValueError:
        return None
    return expires if lifetime > 0 and now <= expires <= now + lifetime + 1 else None


def signed_blob(key: bytes, doc_id: str, version: int, query: Mapping[str, str], now: float,
                lifetime: float) -> str | None:
    """The blob a read URL of ``doc_id`` at ``version`` names, if the service signed it for
    that blob, that version and that expiry, and it has not expired (nor claims to live
    longer than ``lifetime``); None otherwise. The one check of a query naming a blob."""
    blob, expires = query.get("blob"), _expiry(query, now, lifetime)
    if not blob or expires is None:
        return None
    expected = signature(key, doc_id, query.get("by", ""), expires, str(version), blob)
    return blob if hmac.compare_digest(expected, query.get("sig", "")) else None


def carries_link(query: Mapping[str, str]) -> bool:
    """Whether a request presents a link (rather than, or as well as, a bearer token)."""
    return "sig" in query


def link_admits(key: bytes, tokens: Mapping[str, frozenset[str]], owner: Callable[[str], str],
                doc_id: str, query: Mapping[str, str], now: float,
                version: str | None = None, lifetime: float = LIFETIME) -> bool:
    """Whether ``query`` is a valid, unexpired link to ``doc_id`` the service made for a
    configured read token (``owner`` names a token by its digest): a download link, or a
    read URL of ``version`` naming its blob, which may live ``lifetime`` seconds."""
    by = query.get("by", "")
    if not any("read" in scopes and hmac.compare_digest(owner(token), by)
               for token, scopes in tokens.items()):
        return False
    if "blob" in query:
        if version is None or not (version.isascii() and version.isdigit()):
            return False
        return signed_blob(key, doc_id, int(version), query, now, lifetime) is not None
    expires = _expiry(query, now, LIFETIME)
    return expires is not None and hmac.compare_digest(
        signature(key, doc_id, by, expires), query.get("sig", ""))
