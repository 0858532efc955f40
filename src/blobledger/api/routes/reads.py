"""Signed reads: the URL a reader is redirected to, or handed, for one version's bytes.

The store signs it where it can (an Azure read-only SAS, an S3 presigned GET) for
:func:`~blobledger.config.read_url_lifetime` seconds, which the settings check keeps within
the deletion grace less the clock skew: the blob a URL opens outlives the URL, even when
the document is replaced or deleted the moment after (docs/protocol.md). On local disk the
service signs its own URL to the version's route (``/documents/{id}/versions/{v}/content``),
naming the blob it was made for, for as long (:func:`~blobledger.api.links.version_query`,
signed with the service's own key, tokens or not): it too reads those bytes until it
expires, replaced or deleted. With a grace too short for
the skew (no lifetime) the service's URL names no blob and opens the bytes only while the
version is the document's (a :mod:`~blobledger.api.links` link where tokens are configured).
None where no URL can be made for this request (tokens configured, and the request came by
a link rather than with a token).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastapi import Request

from blobledger.api.auth import owner_of, presented_token, signing_key
from blobledger.api.links import LIFETIME, link_query, version_query
from blobledger.api.routes import ledger_of, location_for, safe_content_type, settings_of
from blobledger.config import read_url_lifetime
from blobledger.protocol.documents import Document


@dataclass(frozen=True)
class ReadUrl:
    url: str
    #: None: a URL that needs no signature (no tokens configured) and does not expire
    expires_at: datetime | None


async def read_url(request: Request, doc: Document) -> ReadUrl | None:
    """A URL reading ``doc``'s bytes at its version, for the holder of no credential."""
    settings = settings_of(request)
    lifetime = read_url_lifetime(settings)
    if lifetime > 0:
        signed = await ledger_of(request).store.read_url(
            doc.blob, expires_in=lifetime, filename=doc.name,
            content_type=safe_content_type(doc))
        if signed is not None:
            return ReadUrl(signed.url, signed.expires_at)
    url = location_for(request, "download_version", doc_id=doc.id,
                           version=str(doc.version))
    token = presented_token(request.scope) if settings.api_tokens else None
    if settings.api_tokens and token is None:
        return None
    now = time.time()
    if lifetime > 0:
        expires = int(now + lifetime)
        query = version_query(await signing_key(request), owner_of(token) if token else None,
                              doc.id, doc.version, doc.blob, expires)
        return ReadUrl(f"{url}?{query}", datetime.fromtimestamp(expires, UTC))
    if token is None:
        return ReadUrl(url, None)
    query = link_query(await signing_key(request), owner_of(token), doc.id, now)
    return ReadUrl(f"{url}?{query}",
                   datetime.fromtimestamp(int(now), UTC) + timedelta(seconds=LIFETIME))
