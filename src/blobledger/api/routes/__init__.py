"""The routes of the service, one module per resource, and what they share."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import Request
from starlette.responses import JSONResponse

from blobledger._base.names import is_media_type
from blobledger.api.browser import own_base_url
from blobledger.api.guard import OWNER_KEY
from blobledger.api.headers import etag, etag_versions
from blobledger.api.problems import Problem
from blobledger.config import Settings
from blobledger.errors import NotFound
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.transitions.records import UploadOwner

log = logging.getLogger("blobledger.api")
FALLBACK_CONTENT_TYPE = "application/octet-stream"


def ledger_of(request: Request) -> Ledger:
    ledger = request.app.state.ledger
    if ledger is None:
        raise Problem(503, "unavailable", "the service is starting or stopping",
                      headers={"Retry-After": "1"})
    assert isinstance(ledger, Ledger)
    return ledger


def settings_of(request: Request) -> Settings:
    settings = request.app.state.settings
    assert isinstance(settings, Settings)
    return settings


def upload_owner(request: Request) -> UploadOwner | None:
    """Who creates an upload (the owner the Guard admitted: a digest of the token) and its
    share of open uploads and reserved names; None outside the Guard (no limits)."""
    owner = getattr(request.state, OWNER_KEY, None)
    if not isinstance(owner, str):
        return None
    settings = settings_of(request)
    return UploadOwner(owner, settings.max_open_uploads, settings.max_reserved_names)


def absolute_url_for(request: Request, name: str, **params: str) -> str:
    """The absolute URL of a route, on ``BLOBLEDGER_PUBLIC_URL`` or else the address the
    connection came in on: never built from the ``Host`` header."""
    path = request.url_for(name, **params).path  # the mount path included; not its host
    return own_base_url(request.scope, settings_of(request)) + path


def location_for(request: Request, name: str, **params: str) -> str:
    """A ``Location``: absolute on ``BLOBLEDGER_PUBLIC_URL`` when it is set, else a path
    (resolved by the client against the URL it used, whatever name it reached us by)."""
    if settings_of(request).public_url:
        return absolute_url_for(request, name, **params)
    return request.url_for(name, **params).path


def document_response(doc: Document, status: int = 200) -> JSONResponse:
    headers = {"ETag": etag(doc.version)}
    if status == 201:
        headers["Location"] = f"/documents/{doc.id}"
    return JSONResponse(doc.to_json(), status_code=status, headers=headers)


async def expected_version(ledger: Ledger, doc_id: str, if_match: str) -> int | None:
    """The version an If-Match value pins: None for ``*`` (any), else one listed version
    (the current one if several are listed); 412 when it names no version."""
    versions = etag_versions(if_match)
    if versions is None:
        return None
    if len(versions) == 1:
        return versions[0]
    current = (await ledger.get(doc_id)).version
    if current in versions:
        return current
    raise Problem(412, "precondition-failed",
                  f"document is at version {current}, not one of those in If-Match",
                  current_version=current)


def known_id(doc_id: str) -> str:
    """The id, or 404 at once for a string no document id can be (a NUL, a control
    character, hundreds of characters): some databases refuse to compare such strings."""
    if len(doc_id) > 128 or not doc_id.isprintable():
        raise Problem(404, "not-found", "no such document")
    return doc_id


@contextmanager
def if_match_on_missing(if_match: str | None) -> Iterator[None]:
    """With If-Match, a document that does not exist fails the precondition (RFC 9110
    section 13.1.1: no current representation matches): 412, not 404."""
    try:
        yield
    except NotFound:
        if if_match is None:
            raise
        raise Problem(412, "precondition-failed",
                      "no such document, so If-Match cannot hold") from None


def safe_content_type(doc: Document) -> str:
    """The document's media type if it can be sent as a header; octet-stream for a value
    stored before media types were checked by their grammar (logged)."""
    if is_media_type(doc.content_type):
        return doc.content_type
    log.warning("document %s has an invalid stored content type %r; sent as %s", doc.id,
                doc.content_type[:80], FALLBACK_CONTENT_TYPE)
    return FALLBACK_CONTENT_TYPE
