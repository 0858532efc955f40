"""``/documents/{id}/variants/{name}``: a derived image of the document's current version,
made on the first request (one maker; the others wait for it); and
``/documents/{id}/versions/{v}/variants/{name}``, the same of one version, immutable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, Response
from starlette.background import BackgroundTask
from starlette.responses import StreamingResponse

from blobledger.api.auth import require
from blobledger.api.headers import etag, matches
from blobledger.api.openapi import empty, problems, raw_response
from blobledger.api.problems import Problem
from blobledger.api.routes import known_id, ledger_of, settings_of
from blobledger.api.routes.content import (
    ATTEMPTS,
    IMMUTABLE,
    _chunks,
    ranged,
    wanted_range,
)
from blobledger.stores.base import BlobReader
from blobledger.variants import ImageRefused, UnknownVariant, VariantBusy, VersionEnded
from blobledger.variants.maker import Variant, make_variant, open_variant, spec_of

router = APIRouter(tags=["content"])

HEADERS = {"ETag": "the variant's SHA-256, quoted",
           "Cache_Control": "`no-cache` (`private, no-cache` with tokens); a version's "
                            "route: `public, max-age=31536000, immutable`",
           "Accept_Ranges": "`bytes`"}
FORMATS = ("image/webp", "image/jpeg", "image/png")
WHOLE = ("The variant's bytes (`image/webp` unless BLOBLEDGER_VARIANT_FORMAT says `jpeg` or "
         "`png`).")
PART = "The range asked for of the variant's bytes (Content-Range names it)."
IMAGE = raw_response(WHOLE, FORMATS, **HEADERS)
IMAGE_PART = raw_response(PART, FORMATS, **HEADERS, Content_Range="the range sent")
NOT_MODIFIED = empty("If-None-Match matched.", ETag=HEADERS["ETag"])
Answers = dict[int | str, dict[str, Any]]
GET_ANSWERS: Answers = {200: IMAGE, 206: IMAGE_PART, 304: NOT_MODIFIED}
HEAD_ANSWERS: Answers = {200: empty(WHOLE, **HEADERS, Content_Length="its size"),
                         206: empty(PART, **HEADERS, Content_Range="the range"),
                         304: NOT_MODIFIED}
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]
RangeHeader = Annotated[str | None, Header(alias="Range")]
IfRange = Annotated[str | None, Header(alias="If-Range")]


@router.get("/documents/{doc_id}/variants/{name}", operation_id="download_variant",
            responses={**GET_ANSWERS, **problems(404, 415, 416, 422, 502, 503)},
            response_class=StreamingResponse, dependencies=[Depends(require("read"))])
@router.head("/documents/{doc_id}/variants/{name}", operation_id="head_variant",
             responses={**HEAD_ANSWERS, **problems(404, 415, 416, 422, 503)},
             response_class=Response, dependencies=[Depends(require("read"))])
async def download_variant(request: Request, doc_id: str, name: str,
                           if_none_match: IfNoneMatch = None, range_: RangeHeader = None,
                           if_range: IfRange = None) -> Response:
    """The variant ``name`` (``BLOBLEDGER_VARIANTS``) of the document's current version, made
    now if it was not (the first request makes it, a HEAD too; concurrent ones wait and read
    the same bytes); Range, If-Range and If-None-Match honoured against its ETag. 404 for an
    unknown variant or a document that is not an image; 415 for an image the service cannot
    read; 422 for one too large (pixels or bytes) or undecodable."""
    private = "private, " if settings_of(request).api_tokens else ""
    return await _serve(request, doc_id, name, None, f"{private}no-cache",
                        _Conditions(if_none_match, range_, if_range))


@router.get("/documents/{doc_id}/versions/{version}/variants/{name}",
            operation_id="download_version_variant",
            responses={**GET_ANSWERS, **problems(404, 410, 415, 416, 422, 502, 503)},
            response_class=StreamingResponse, dependencies=[Depends(require("read"))])
@router.head("/documents/{doc_id}/versions/{version}/variants/{name}",
             operation_id="head_version_variant",
             responses={**HEAD_ANSWERS, **problems(404, 410, 415, 416, 422, 503)},
             response_class=Response, dependencies=[Depends(require("read"))])
async def download_version_variant(request: Request, doc_id: str, version: int, name: str,
                                   if_none_match: IfNoneMatch = None,
                                   range_: RangeHeader = None,
                                   if_range: IfRange = None) -> Response:
    """The variant ``name`` of one version, which never changes (``immutable``, a year):
    of the current version only; an older one is 410. Range, If-Range, If-None-Match and
    HEAD as on the current version's route."""
    private = "private" if settings_of(request).api_tokens else "public"
    return await _serve(request, doc_id, name, version, f"{private}, {IMMUTABLE}",
                        _Conditions(if_none_match, range_, if_range))


@dataclass(frozen=True)
class _Conditions:
    if_none_match: str | None
    range: str | None
    if_range: str | None


@dataclass
class _Answer:
    """What is sent of a variant, decided once its size and ETag are known."""

    headers: dict[str, str]
    status: int = 200
    start: int = 0
    length: int = 0


def _decide(variant: Variant, cache_control: str, asked: _Conditions) -> _Answer:
    """The answer's status, headers and span: 304 when If-None-Match names the variant's
    ETag, else 200 or 206 (416 raised) by the content route's own rules."""
    answer = _Answer({"ETag": etag(variant.sha256), "Cache-Control": cache_control,
                      "Accept-Ranges": "bytes", "Content-Type": variant.content_type,
                      "X-Content-Type-Options": "nosniff",
                      "Content-Security-Policy": "default-src 'none'; sandbox"})
    if matches(asked.if_none_match, variant.sha256):
        answer.status = 304
        answer.headers = {k: answer.headers[k] for k in ("ETag", "Cache-Control")}
        return answer
    wanted = wanted_range(variant.size, variant.sha256, asked.range, asked.if_range,
                          "the variant")
    answer.status, answer.start, answer.length = ranged(answer.headers, variant.size, wanted)
    return answer


async def _serve(request: Request, doc_id: str, name: str, version: int | None,
                 cache_control: str, asked: _Conditions) -> Response:
    ledger = ledger_of(request)
    known_id(doc_id)
    decided: list[_Answer] = []

    def span(variant: Variant) -> tuple[int, int | None]:
        decided.append(_decide(variant, cache_control, asked))
        answer = decided[-1]
        return (answer.start, answer.length) if answer.status != 304 else (0, None)

    reader: BlobReader | None = None
    for _ in range(ATTEMPTS):
        try:
            spec_of(ledger, name)
            doc = await ledger.get(doc_id)  # visible documents only
            if version is not None and version != doc.version:
                raise _not_current(doc.version, version)
            if request.method == "HEAD":  # made if it was not; its bytes not read
                variant = await make_variant(ledger, doc_id, name, version=doc.version)
                span(variant)
            else:
                variant, reader = await open_variant(ledger, doc_id, name,
                                                     version=doc.version, span=span)
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
    answer = decided[-1]
    if reader is None or answer.status == 304:
        if reader is not None:
            await reader.aclose()
        return Response(status_code=answer.status, headers=answer.headers)
    return StreamingResponse(_chunks(reader), status_code=answer.status,
                             headers=answer.headers, media_type=variant.content_type,
                             background=BackgroundTask(reader.aclose))


def _not_current(current: int, version: int) -> Problem:
    if version < current:
        return Problem(410, "version-gone",
                       f"version {version} was replaced: the document is at {current}")
    return Problem(404, "not-found", f"the document has no version {version}")
