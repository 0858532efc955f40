"""``/documents``: create (streamed), list, show and delete documents."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from blobledger._base.names import check_document_name
from blobledger.api.auth import require
from blobledger.api.guard import OWNER_KEY
from blobledger.api.headers import etag, expected_digests, matches
from blobledger.api.openapi import empty, headers, json_body, problems, raw_request
from blobledger.api.problems import Problem
from blobledger.api.routes import (
    document_response,
    expected_version,
    if_match_on_missing,
    known_id,
    ledger_of,
    settings_of,
)
from blobledger.api.uploads import query_param, read_upload
from blobledger.errors import NotFound
from blobledger.protocol.documents import Document
from blobledger.protocol.held import HELD, HoldState
from blobledger.protocol.models import DEFAULT_BUCKET

router = APIRouter(tags=["documents"])

CREATE_BODY = raw_request(
    "A form with a `file` field and a `name` field (send `name` first, or let it equal the "
    "file's filename), or the raw bytes with `?name=` (their Content-Type, any media type, "
    "is the document's).",
    ("application/octet-stream",),
    form={"type": "object", "required": ["file", "name"],
          "properties": {"name": {"type": "string"}, "file": {"type": "string",
                                                               "format": "binary"}}})
DOCUMENT_REF = {"$ref": "#/components/schemas/Document"}
PAGE = {"type": "object", "required": ["items", "next_cursor"], "properties": {
    "items": {"type": "array", "items": DOCUMENT_REF},
    "next_cursor": {"type": ["string", "null"],
                    "description": "the `cursor` of the next page; null on the last"}}}
ETAG = "the document's version, quoted"


def _cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _after(cursor: str) -> str:
    try:
        name = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        return check_document_name(name)
    except (binascii.Error, ValueError):
        raise Problem(400, "invalid-cursor", "the cursor is not one this service gave out") \
            from None


@router.post(
    "/documents", status_code=201, openapi_extra=CREATE_BODY,
    responses={201: {"model": Document, "description": "The document, ready (or held: "
                     "`status` says, docs/pipeline.md).",
                     "headers": headers(ETag=ETAG, Location="the document's URL")},
               **problems(409, 413, 422, 429, 502, 503)},
    dependencies=[Depends(require("write"))],
)
async def create_document(
    request: Request,
    name: Annotated[str | None, Query(description="the name, for a raw body")] = None,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    repr_digest: Annotated[str | None, Header(alias="Repr-Digest",
                           description="sha-256=:<base64>: of the file's bytes")] = None,
    content_md5: Annotated[str | None, Header(alias="Content-MD5")] = None,
    hold: Annotated[bool, Query(description="held until every processor accepted it "
                                "(docs/pipeline.md)")] = False,
) -> Response:
    """Create a document in the default bucket; its bytes stream to the store and it becomes
    visible last (a held one, ``status: held``, once every processor accepted it)."""
    return await create_in(request, DEFAULT_BUCKET, idempotency_key, repr_digest,
                           content_md5, hold)


async def create_in(request: Request, bucket: str, idempotency_key: str | None,
                    repr_digest: str | None, content_md5: str | None, hold: bool) -> Response:
    """A create in ``bucket`` (its settings apply: the ledger admits the write)."""
    ledger = ledger_of(request)
    sha256, md5 = expected_digests(repr_digest, content_md5)
    upload = await read_upload(request, settings_of(request).max_upload_bytes, named=True)
    doc = await ledger.create(upload.name, upload.data, content_type=upload.content_type,
                              idempotency_key=idempotency_key, sha256=sha256, md5=md5,
                              name_after_upload=upload.late_name, hold=hold,
                              owner=writer_of(request), bucket=bucket)
    return document_response(doc, 201)


def writer_of(request: Request) -> str | None:
    """Who the request writes as: the Guard's owner (a digest of its token; the one
    anonymous population when no tokens are configured)."""
    owner = getattr(request.state, OWNER_KEY, None)
    return owner if isinstance(owner, str) else None


async def held_answer(request: Request, doc_id: str) -> Response | None:
    """A held or rejected document's state, for its writer only (None for anyone else:
    the caller answers 404, as for an id that does not exist)."""
    state: HoldState | None = await ledger_of(request).hold_state(doc_id)
    writer = writer_of(request)
    if state is None or writer is None or state.owner != writer:
        return None
    if state.status == HELD:
        return JSONResponse(state.to_json(), status_code=200)
    raise Problem(410, "document-rejected",
                  f"document {doc_id} was rejected: {state.reason}", reason=state.reason,
                  processors=state.processors)


@router.get("/documents", responses={200: json_body("A page of documents.", PAGE),
                                     **problems(503)},
            dependencies=[Depends(require("read"))])
@router.head("/documents", include_in_schema=False, dependencies=[Depends(require("read"))])
async def list_documents(
    request: Request,
    prefix: Annotated[str, Query(max_length=1024)] = "",
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """Ready documents of the default bucket in name order, a page at a time (follow
    ``next_cursor``)."""
    return await page_of(request, DEFAULT_BUCKET, cursor, limit)


async def page_of(request: Request, bucket: str, cursor: str | None,
                  limit: int) -> dict[str, Any]:
    """A page of ``bucket``'s ready documents."""
    prefix = query_param(request, "prefix") or ""
    after = _after(cursor) if cursor else None
    docs = await ledger_of(request).page(prefix=prefix, after=after, limit=limit,
                                         bucket=bucket)
    next_cursor = _cursor(docs[-1].name) if len(docs) == limit else None
    return {"items": [d.to_json() for d in docs], "next_cursor": next_cursor}


@router.get("/documents/{doc_id}", operation_id="show_document",
            responses={200: {"model": Document, "headers": headers(ETag=ETAG),
                             "description": "The document; to the writer of a held one, "
                             "its state (`status: held`, docs/pipeline.md)."},
                       304: empty("If-None-Match matched.", ETag=ETAG),
                       **problems(404, 410, 503)},
            dependencies=[Depends(require("read"))])
@router.head("/documents/{doc_id}", operation_id="head_document",
             response_class=Response,
             responses={200: empty("The document exists (its JSON is not sent).", ETag=ETAG),
                        304: empty("If-None-Match matched.", ETag=ETAG),
                        **problems(404, 503)},
             dependencies=[Depends(require("read"))])
async def show_document(
    request: Request,
    doc_id: str,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """A ready document (a pending or unknown id is a 404; a held one too, except to its
    writer, who is told its state: held, or rejected (410) with the reason)."""
    try:
        doc = await ledger_of(request).get(doc_id)
    except NotFound:
        answer = await held_answer(request, doc_id)
        if answer is None:
            raise
        if request.method == "HEAD":
            return Response(status_code=answer.status_code)
        return answer
    if matches(if_none_match, doc.version):
        return Response(status_code=304, headers={"ETag": etag(doc.version)})
    response = document_response(doc)
    if request.method == "HEAD":
        return Response(status_code=200, headers=dict(response.headers))
    return response


@router.delete(
    "/documents/{doc_id}", status_code=204,
    responses={204: empty("Deleted."), **problems(404, 412, 503)},
    dependencies=[Depends(require("write"))],
)
async def delete_document(
    request: Request,
    doc_id: str,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    """Remove the document now (its bytes go to the deletion path); If-Match honoured."""
    ledger = ledger_of(request)
    known_id(doc_id)
    with if_match_on_missing(if_match):
        version = await expected_version(ledger, doc_id, if_match) if if_match else None
        await ledger.delete(doc_id, expected_version=version)
    return Response(status_code=204)
