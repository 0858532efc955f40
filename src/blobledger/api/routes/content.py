"""``/documents/{id}/content``: streamed, ranged, conditional downloads (or a redirect to a
signed URL), and replacement; ``/documents/{id}/versions/{v}/content``: one version's
immutable bytes; ``/documents/{id}/link``: a download link a browser follows by itself;
``/documents/{id}/url``: a signed read URL and its expiry."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from blobledger._base.disposition import content_disposition
from blobledger.api.auth import CHALLENGE, owner_of, presented_token, require, signing_key
from blobledger.api.headers import (
    ByteRange,
    Unsatisfiable,
    etag,
    expected_digests,
    http_date,
    if_range_matches,
    matches,
    parse_range,
    repr_digest,
)
from blobledger.api.links import LIFETIME, link_query, signed_blob
from blobledger.api.openapi import empty, headers, json_body, problems, raw_request, raw_response
from blobledger.api.problems import Problem
from blobledger.api.routes import (
    document_response,
    expected_version,
    if_match_on_missing,
    known_id,
    ledger_of,
    safe_content_type,
    settings_of,
)
from blobledger.api.routes.reads import read_url
from blobledger.api.uploads import read_upload
from blobledger.config import read_url_lifetime
from blobledger.errors import BlobNotFound, NotFound
from blobledger.protocol.documents import Document
from blobledger.stores.base import BlobReader

router = APIRouter(tags=["content"])

ATTEMPTS = 3
REPLACE_BODY = raw_request(
    "The new bytes, raw (their Content-Type, any media type, is the document's) or as a "
    "form `file` field.",
    ("application/octet-stream",),
    form={"type": "object", "required": ["file"],
          "properties": {"file": {"type": "string", "format": "binary"}}})
BYTES = {
    "ETag": "the document's version, quoted", "Last_Modified": "when it last changed",
    "Accept_Ranges": "`bytes`",
    "Content_Disposition": "`inline` (raster images, PDF, plain text, audio, video) or "
                           "`attachment`, with its name",
    "Cache_Control": "`no-cache` (`private, no-cache` with tokens); a version's route: "
                     "`public, max-age=31536000, immutable` (`private, ...` with tokens)",
    "Repr_Digest": "`sha-256=:<base64>:` of all its bytes (RFC 9530)"}
WHOLE = "The document's bytes, of its own media type."
PART = "The range asked for (Content-Range names it)."
NOT_MODIFIED = "If-None-Match matched."
REDIRECT = empty("A signed URL to the bytes (`redirect`): follow it, Range included.",
                 Location="the signed URL", Cache_Control="`no-store`")
#: a version's bytes never change: caches may keep them for a year without asking again
IMMUTABLE = "max-age=31536000, immutable"
Redirect = Annotated[bool | None, Query(
    description="`true`: answer 307 to a signed URL of the bytes; `false`: stream them; "
                "unset: as BLOBLEDGER_DOWNLOADS says (`proxy` by default)")]


def _headers(doc: Document, cache_control: str) -> dict[str, str]:
    headers = {
        "Cache-Control": cache_control,
        "ETag": etag(doc.version),
        "Last-Modified": http_date(doc.updated_at),
        "Accept-Ranges": "bytes",
        "Content-Type": safe_content_type(doc),
        "Content-Disposition": content_disposition(doc.name, safe_content_type(doc)),
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
    }
    if doc.sha256:
        headers["Repr-Digest"] = repr_digest(doc.sha256)
    return headers


def wanted_range(size: int, tag: int | str, range_header: str | None, if_range: str | None,
                 what: str = "the document") -> ByteRange | None:
    """The byte range to send of a representation of ``size`` bytes whose strong ETag names
    ``tag`` (None: all of it): Range honoured unless If-Range names another representation;
    416 ``range-not-satisfiable`` for a range past its end. The one place the content and the
    variant routes decide it."""
    if range_header is None:
        return None
    if if_range is not None and not if_range_matches(if_range, tag):
        return None
    try:
        return parse_range(range_header, size)
    except Unsatisfiable:
        raise Problem(416, "range-not-satisfiable", f"{what} has {size} bytes",
                      headers={"Content-Range": f"bytes */{size}"}) from None


def ranged(headers: dict[str, str], size: int, wanted: ByteRange | None) -> tuple[int, int, int]:
    """The status (200 or 206), start and length of an answer sending ``wanted`` (None: all)
    of ``size`` bytes; ``Content-Length`` (and ``Content-Range``) set in ``headers``."""
    if wanted is None:
        headers["Content-Length"] = str(size)
        return 200, 0, size
    headers["Content-Length"] = str(wanted.length)
    headers["Content-Range"] = wanted.content_range(size)
    return 206, wanted.start, wanted.length


async def _chunks(reader: BlobReader) -> AsyncIterator[bytes]:
    try:
        async for chunk in reader:
            yield chunk
    finally:
        await reader.aclose()


@router.get("/documents/{doc_id}/content", operation_id="download",
            responses={200: raw_response(WHOLE, **BYTES),
                       206: raw_response(PART, **BYTES, Content_Range="the range sent"),
                       304: empty(NOT_MODIFIED, ETag=BYTES["ETag"]),
                       307: REDIRECT,
                       **problems(404, 416, 502, 503)},
            response_class=StreamingResponse,
            dependencies=[Depends(require("read", links=True))])
@router.head("/documents/{doc_id}/content", operation_id="head_content",
             responses={200: empty(WHOLE, **BYTES, Content_Length="its size"),
                        206: empty(PART, **BYTES, Content_Range="the range"),
                        304: empty(NOT_MODIFIED, ETag=BYTES["ETag"]),
                        307: REDIRECT,
                        **problems(404, 416, 503)},
             response_class=Response, dependencies=[Depends(require("read", links=True))])
async def download(
    request: Request,
    doc_id: str,
    redirect: Redirect = None,
    range_: Annotated[str | None, Header(alias="Range")] = None,
    if_range: Annotated[str | None, Header(alias="If-Range")] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """The document's bytes, streamed (Range, If-Range and If-None-Match honoured), or a
    307 to a signed URL of its current version's bytes (``?redirect=true``, or
    ``BLOBLEDGER_DOWNLOADS=redirect``). Always revalidated by caches (ETag, ``no-cache``)."""
    settings = settings_of(request)
    if redirect is None:
        redirect = settings.downloads == "redirect"
    private = "private, " if settings.api_tokens else ""
    if redirect:
        doc = await ledger_of(request).get(doc_id)
        if not matches(if_none_match, doc.version):
            signed = await read_url(request, doc)
            if signed is not None:
                return Response(status_code=307, headers={
                    "Location": signed.url, "Cache-Control": "no-store"})
    return await _serve(request, doc_id, None, f"{private}no-cache",
                        range_, if_range, if_none_match)


@router.get("/documents/{doc_id}/versions/{version}/content", operation_id="download_version",
            responses={200: raw_response(WHOLE, **BYTES),
                       206: raw_response(PART, **BYTES, Content_Range="the range sent"),
                       304: empty(NOT_MODIFIED, ETag=BYTES["ETag"]),
                       **problems(404, 410, 416, 502, 503)},
            response_class=StreamingResponse,
            dependencies=[Depends(require("read", links=True))])
@router.head("/documents/{doc_id}/versions/{version}/content",
             operation_id="head_version_content",
             responses={200: empty(WHOLE, **BYTES, Content_Length="its size"),
                        206: empty(PART, **BYTES, Content_Range="the range"),
                        304: empty(NOT_MODIFIED, ETag=BYTES["ETag"]),
                        **problems(404, 410, 416, 503)},
             response_class=Response, dependencies=[Depends(require("read", links=True))])
async def download_version(
    request: Request,
    doc_id: str,
    version: int,
    blob: Annotated[str | None, Query(
        description="the blob a signed read URL was made for (with `expires`, `sig`, and "
                    "`by` where tokens are configured): read until the URL expires, even "
                    "once the version was replaced or the document deleted; served only "
                    "with the signature the service made for it (else 401)")] = None,
    range_: Annotated[str | None, Header(alias="Range")] = None,
    if_range: Annotated[str | None, Header(alias="If-Range")] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """The bytes of one version, which never change (``Cache-Control: immutable``, a year):
    the current version's; an older one is 410 (its blob is gone, or about to be), one not
    yet written 404; with a signed read URL's ``blob``, its signature (the service's, for this
    blob, version and expiry: else 401) unexpired, that blob's bytes as long as the deletion
    path has not taken them (it waits for the URL: docs/protocol.md)."""
    settings = settings_of(request)
    private = "private" if settings.api_tokens else "public"
    if blob is not None:
        named = signed_blob(await signing_key(request), doc_id, version,
                            request.query_params, time.time(), read_url_lifetime(settings))
        if named is None:
            raise Problem(401, "unauthorized", "the read URL is not valid or has expired: "
                          "ask for a new one", headers=CHALLENGE)
        return await _serve_former(request, doc_id, version, named,
                                   f"{private}, {IMMUTABLE}", range_, if_range, if_none_match)
    return await _serve(request, doc_id, version, f"{private}, {IMMUTABLE}",
                        range_, if_range, if_none_match)


def _not_current(doc: Document, version: int) -> Problem:
    if version < doc.version:
        return Problem(410, "version-gone",
                       f"version {version} was replaced: the document is at {doc.version}")
    return Problem(404, "not-found", f"the document has no version {version}")


def _planned(request: Request, doc: Document, cache_control: str, range_: str | None,
             if_range: str | None, if_none_match: str | None,
             ) -> Response | tuple[int, dict[str, str], int, int]:
    """The answer to a read of ``doc``'s bytes when it needs none of them (304, HEAD), else
    its status, headers, and the bytes to send (start, length)."""
    headers = _headers(doc, cache_control)
    if matches(if_none_match, doc.version):
        return Response(status_code=304, headers={
            k: headers[k] for k in ("ETag", "Last-Modified", "Cache-Control")})
    size = doc.size or 0
    status, start, length = ranged(
        headers, size, wanted_range(size, doc.version, range_, if_range))
    if request.method == "HEAD":
        return Response(status_code=status, headers=headers)
    return status, headers, start, length


def _streamed(reader: BlobReader, status: int, headers: dict[str, str]) -> Response:
    return StreamingResponse(_chunks(reader), status_code=status, headers=headers,
                             media_type=headers["Content-Type"],
                             background=BackgroundTask(reader.aclose))


async def _serve(request: Request, doc_id: str, version: int | None, cache_control: str,
                 range_: str | None, if_range: str | None,
                 if_none_match: str | None) -> Response:
    """The document's bytes (of ``version``, if given), conditional and ranged."""
    ledger = ledger_of(request)
    for _ in range(ATTEMPTS):
        doc = await ledger.get(doc_id)
        if version is not None and doc.version != version:
            raise _not_current(doc, version)
        plan = _planned(request, doc, cache_control, range_, if_range, if_none_match)
        if isinstance(plan, Response):
            return plan
        status, headers, start, length = plan
        opened, reader = await ledger.open(doc_id, start, length)
        if opened.version != doc.version:  # replaced in between: decide again on the new one
            await reader.aclose()
            continue
        return _streamed(reader, status, headers)
    raise Problem(503, "busy", "the document kept changing while being read; retry",
                  headers={"Retry-After": "1"})


async def _serve_former(request: Request, doc_id: str, version: int, blob: str,
                        cache_control: str, range_: str | None, if_range: str | None,
                        if_none_match: str | None) -> Response:
    """The bytes of the blob a signed read URL names: the document's at ``version``, read
    by the blob's name (a replace meanwhile changes nothing), while its row and bytes are
    there; 410 once the deletion path took them."""
    ledger = ledger_of(request)
    gone = Problem(410, "version-gone", f"version {version} of {doc_id} is gone")
    try:
        doc = await ledger.former(doc_id, version, blob)
    except NotFound:
        raise gone from None
    plan = _planned(request, doc, cache_control, range_, if_range, if_none_match)
    if isinstance(plan, Response):
        return plan
    status, headers, start, length = plan
    try:
        reader = await ledger.store.open(blob, start, length)
    except BlobNotFound:
        raise gone from None
    return _streamed(reader, status, headers)


@router.post("/documents/{doc_id}/url", operation_id="read_url",
             responses={200: json_body(
                 "A URL reading the document's current bytes with no credential (Range "
                 "honoured), and when it stops (null: it does not, with no tokens "
                 "configured). The blob it opens outlives it.", {
                     "type": "object", "required": ["url", "expires_at"],
                     "properties": {"url": {"type": "string"},
                                    "expires_at": {"type": ["string", "null"],
                                                   "format": "date-time"}}}),
                        **problems(404, 503)},
             dependencies=[Depends(require("read"))])
async def signed_url(request: Request, doc_id: str) -> dict[str, Any]:
    """A signed read URL of the document's current version: the store's own where it signs
    one (Azure SAS, S3 presigned GET), else the service's."""
    known_id(doc_id)
    doc = await ledger_of(request).get(doc_id)
    signed = await read_url(request, doc)
    if signed is None:  # a token was presented: the service can always sign
        raise Problem(503, "unavailable", "no signed URL can be made for this request")
    expires = signed.expires_at.isoformat().replace("+00:00", "Z") if signed.expires_at else None
    return {"url": signed.url, "expires_at": expires}


@router.get("/documents/{doc_id}/link", operation_id="download_link",
            responses={200: json_body("A URL to the content that needs no Authorization "
                                      "header, and for how many seconds it opens it.", {
                "type": "object", "required": ["url", "expires_in"],
                "properties": {"url": {"type": "string"},
                               "expires_in": {"type": ["integer", "null"]}}}),
                       **problems(404, 503)},
            dependencies=[Depends(require("read"))])
async def download_link(request: Request, doc_id: str) -> dict[str, Any]:
    """A URL to the document's content that needs no ``Authorization`` header, for a
    browser's plain download link (``<a href download>``): it opens this document alone,
    for ``expires_in`` seconds (see :mod:`blobledger.api.links`). With no tokens configured
    it is the content's plain URL."""
    known_id(doc_id)
    await ledger_of(request).get(doc_id)  # 404 for a document that is not there
    path = request.url_for("download", doc_id=doc_id).path
    token = presented_token(request.scope)
    if not settings_of(request).api_tokens or token is None:
        return {"url": path, "expires_in": None}
    query = link_query(await signing_key(request), owner_of(token), doc_id, time.time())
    return {"url": f"{path}?{query}", "expires_in": LIFETIME}


@router.put(
    "/documents/{doc_id}/content", openapi_extra=REPLACE_BODY,
    responses={200: {"model": Document, "description": "The document, at its new version.",
                     "headers": headers(ETag=BYTES["ETag"])},
               **problems(404, 412, 413, 428, 502, 503)},
    dependencies=[Depends(require("write"))],
)
async def replace(
    request: Request,
    doc_id: str,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
    repr_digest_: Annotated[str | None, Header(alias="Repr-Digest")] = None,
    content_md5: Annotated[str | None, Header(alias="Content-MD5")] = None,
) -> Response:
    """Point the document at new bytes; If-Match (its ETag) is required."""
    if if_match is None:
        raise Problem(428, "precondition-required",
                      "a replace needs If-Match with the document's ETag (or *)")
    ledger = ledger_of(request)
    known_id(doc_id)
    sha256, md5 = expected_digests(repr_digest_, content_md5)
    with if_match_on_missing(if_match):
        version = await expected_version(ledger, doc_id, if_match)
        if version is None:
            version = (await ledger.get(doc_id)).version
        upload = await read_upload(request, settings_of(request).max_upload_bytes,
                                   named=False)
        doc = await ledger.replace(doc_id, upload.data, expected_version=version,
                                   content_type=upload.content_type, sha256=sha256, md5=md5)
    return document_response(doc)
