"""``/documents/{id}/variants/{name}``: a derived image of the document's current version,
made on the first request (one maker; the others wait for it); and
``/documents/{id}/versions/{v}/variants/{name}``, the same of one version, immutable."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from blobledger.api.auth import require
from blobledger.api.headers import MalformedHeader, parse_entity_tags
from blobledger.api.openapi import empty, problems, raw_response
from blobledger.api.problems import Problem
from blobledger.api.routes import known_id, ledger_of, settings_of
from blobledger.api.routes.content import ATTEMPTS, IMMUTABLE, _chunks
from blobledger.variants import ImageRefused, UnknownVariant, VariantBusy, VersionEnded
from blobledger.variants.maker import open_variant, spec_of

router = APIRouter(tags=["content"])

HEADERS = {"ETag": "the variant's SHA-256, quoted",
           "Cache_Control": "`no-cache` (`private, no-cache` with tokens); a version's "
                            "route: `public, max-age=31536000, immutable`"}
IMAGE = raw_response("The variant's bytes (`image/webp` unless BLOBLEDGER_VARIANT_FORMAT says "
                     "`jpeg` or `png`).", ("image/webp", "image/jpeg", "image/png"),
                     **HEADERS)
NOT_MODIFIED = empty("If-None-Match matched.", ETag=HEADERS["ETag"])
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]


@router.get("/documents/{doc_id}/variants/{name}", operation_id="download_variant",
            responses={200: IMAGE, 304: NOT_MODIFIED, **problems(404, 415, 422, 502, 503)},
            response_class=StreamingResponse, dependencies=[Depends(require("read"))])
async def download_variant(request: Request, doc_id: str, name: str,
                           if_none_match: IfNoneMatch = None) -> Response:
    """The variant ``name`` (``BLOBLEDGER_VARIANTS``) of the document's current version, made
    now if it was not (the first request makes it; concurrent ones wait and read the same
    bytes). 404 for an unknown variant or a document that is not an image; 415 for an image
    the service cannot read; 422 for one too large (pixels or bytes) or undecodable."""
    private = "private, " if settings_of(request).api_tokens else ""
    return await _serve(request, doc_id, name, None, f"{private}no-cache", if_none_match)


@router.get("/documents/{doc_id}/versions/{version}/variants/{name}",
            operation_id="download_version_variant",
            responses={200: IMAGE, 304: NOT_MODIFIED,
                       **problems(404, 410, 415, 422, 502, 503)},
            response_class=StreamingResponse, dependencies=[Depends(require("read"))])
async def download_version_variant(request: Request, doc_id: str, version: int, name: str,
                                   if_none_match: IfNoneMatch = None) -> Response:
    """The variant ``name`` of one version, which never changes (``immutable``, a year):
    of the current version only; an older one is 410."""
    private = "private" if settings_of(request).api_tokens else "public"
    return await _serve(request, doc_id, name, version, f"{private}, {IMMUTABLE}",
                        if_none_match)


async def _serve(request: Request, doc_id: str, name: str, version: int | None,
                 cache_control: str, if_none_match: str | None) -> Response:
    ledger = ledger_of(request)
    known_id(doc_id)
    for _ in range(ATTEMPTS):
        try:
            spec_of(ledger, name)
            doc = await ledger.get(doc_id)  # visible documents only
            if version is not None and version != doc.version:
                raise _not_current(doc.version, version)
            variant, reader = await open_variant(ledger, doc_id, name, version=doc.version)
            break
        except UnknownVariant as exc:
            raise Problem(404, "no-variant", str(exc)) from None
        except ImageRefused as exc:
            raise Problem(exc.status, exc.kind, str(exc)) from None
        except VersionEnded:
            if version is not None:
                raise _not_current(version + 1, version) from None
            continue  # replaced while it was being made: the new version's
        except VariantBusy as exc:
            raise Problem(503, "busy", str(exc), headers={"Retry-After": "1"}) from None
    else:
        raise Problem(503, "busy", "the document kept changing while its variant was made; "
                      "retry", headers={"Retry-After": "1"})
    tag = f'"{variant.sha256}"'
    headers = {"ETag": tag, "Cache-Control": cache_control,
               "Content-Type": variant.content_type, "Content-Length": str(variant.size),
               "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": "default-src 'none'; sandbox"}
    if _matches(if_none_match, variant.sha256):
        await reader.aclose()
        return Response(status_code=304, headers={
            k: headers[k] for k in ("ETag", "Cache-Control")})
    return StreamingResponse(_chunks(reader), headers=headers,
                             media_type=variant.content_type,
                             background=BackgroundTask(reader.aclose))


def _not_current(current: int, version: int) -> Problem:
    if version < current:
        return Problem(410, "version-gone",
                       f"version {version} was replaced: the document is at {current}")
    return Problem(404, "not-found", f"the document has no version {version}")


def _matches(value: str | None, sha256: str) -> bool:
    if value is None:
        return False
    try:
        tags = parse_entity_tags(value)
    except MalformedHeader:
        return False
    return tags is None or tags.contains_weak(sha256)
