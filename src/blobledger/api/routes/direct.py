"""``/uploads``: direct uploads over :class:`blobledger.uploads.direct.DirectUploads`.

``POST /uploads`` (JSON: ``name``, ``size``, optional ``content_type`` and ``sha256``) records
the intent and answers where to put the bytes (``method``, ``url``, ``headers``,
``expires_at``); ``POST /uploads/{id}/complete`` checks what the store holds and makes the
document ready; ``DELETE /uploads/{id}`` abandons it. With ``"attachment": true`` (then no
``name``; optional ``filename`` and ``target``, at most 256 characters, kept for the
application) the upload stages an attachment: completion answers the staged blob (``id``,
``blob``, ``size``, ``sha256``, ``md5``, ``content_type``, ``filename``, ``target``,
``state: "staged"``), which the application attaches (``Ledger.staged_upload``).

Where the store offers no URL of its own, the URL is ``PUT /uploads/{id}/content?token=…``
on this service, whose token is its only credential (like a SAS). This module only speaks HTTP.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field
from starlette.responses import JSONResponse

from blobledger.api.auth import require
from blobledger.api.openapi import empty, json_body, problems, raw_request
from blobledger.api.routes import (
    absolute_url_for,
    document_response,
    ledger_of,
    settings_of,
    upload_owner,
)
from blobledger.api.uploads import body_stream, check_declared_size
from blobledger.protocol.attachments import StagedUpload
from blobledger.uploads.direct import DirectUploads

router = APIRouter(tags=["direct uploads"])


class UploadRequest(BaseModel):
    name: str | None = Field(default=None, max_length=1024,
                             description="the document's name (not for an attachment)")
    size: int = Field(ge=0)
    content_type: str | None = Field(default=None, max_length=255)
    sha256: str | None = Field(default=None, description="hex SHA-256 of the bytes")
    attachment: bool = Field(default=False, description="stage an attachment, not a document")
    filename: str | None = Field(default=None, max_length=1024,
                                 description="an attachment's original filename")
    target: str | None = Field(default=None, description=(
        "what an attachment is uploaded for (opaque, at most 256 characters)"))
    bucket: str | None = Field(default=None, max_length=63, description=(
        "the bucket the document is created in (default: the default bucket)"))


TARGET = {"type": "object",
          "required": ["id", "method", "url", "headers", "via", "size", "expires_at",
                       "complete_url"],
          "properties": {
              "id": {"type": "string"}, "method": {"type": "string"},
              "url": {"type": "string", "description": "where to send the bytes"},
              "headers": {"type": "object", "additionalProperties": {"type": "string"}},
              "via": {"type": "string", "enum": ["store", "service"]},
              "size": {"type": "integer"}, "expires_at": {"type": "string"},
              "complete_url": {"type": "string"}}}
STAGED = {"type": "object", "description": "An attachment upload's staged blob.",
          "required": ["id", "blob", "size", "state"],
          "properties": {"id": {"type": "string"}, "blob": {"type": "string"},
                         "size": {"type": "integer"}, "state": {"const": "staged"}}}
MADE = {"anyOf": [{"$ref": "#/components/schemas/Document"}, STAGED]}


def _direct(request: Request) -> DirectUploads:
    existing = getattr(request.app.state, "direct", None)
    ledger = ledger_of(request)
    if not isinstance(existing, DirectUploads) or existing.ledger is not ledger:
        existing = DirectUploads(ledger)
        request.app.state.direct = existing
    return existing


@router.post("/uploads", status_code=201, dependencies=[Depends(require("write"))],
             responses={201: json_body("Where to send the bytes, until when.", TARGET,
                                       Location="the upload's URL"),
                        **problems(409, 413, 429, 502, 503)})
async def begin_upload(request: Request, body: UploadRequest) -> Response:
    """Record the intent (C1); the answer says where to PUT the bytes, until when."""
    began = await _direct(request).begin(
        body.name, body.size, body.content_type, body.sha256, attachment=body.attachment,
        filename=body.filename, target=body.target, owner=upload_owner(request),
        bucket=body.bucket)
    upload = began.upload
    if began.target is not None:
        where: dict[str, Any] = {"method": began.target.method, "url": began.target.url,
                                 "headers": dict(began.target.headers), "via": "store"}
    else:
        url = absolute_url_for(request, "put_upload_content", upload_id=upload.id)
        where = {"method": "PUT", "url": f"{url}?token={began.token}",
                 "headers": {"Content-Type": upload.meta["content_type"]}, "via": "service"}
    complete = absolute_url_for(request, "complete_upload", upload_id=upload.id)
    payload = {"id": upload.id, **where, "size": upload.length,
               "expires_at": began.expires_at.isoformat().replace("+00:00", "Z"),
               "complete_url": complete}
    return JSONResponse(payload, status_code=201,
                        headers={"Location": f"/uploads/{upload.id}"})


@router.put("/uploads/{upload_id}/content", name="put_upload_content", status_code=201,
            response_class=Response,
            openapi_extra=raw_request("The upload's bytes, all of them, with the Content-Type "
                                      "the upload named.", ("application/octet-stream",)),
            responses={201: empty("The bytes, stored."),
                       **problems(409, 410, 413, 502, 503)})
async def put_upload_content(
    request: Request, upload_id: str,
    token: Annotated[str, Query(max_length=256)],
) -> Response:
    """The bytes of a direct upload whose store has no URL of its own (create-only)."""
    limit = settings_of(request).max_upload_bytes
    declared = check_declared_size(request, limit)
    await _direct(request).receive(upload_id, token, body_stream(request, declared, limit),
                                   declared)
    return Response(status_code=201)


@router.post("/uploads/{upload_id}/complete", name="complete_upload", status_code=201,
             dependencies=[Depends(require("write"))],
             responses={201: json_body("The document (or the staged blob), ready.", MADE,
                                       ETag="a document's version, quoted"),
                        **problems(409, 410, 502, 503)})
async def complete_upload(request: Request, upload_id: str) -> Response:
    """Check size and SHA-256 against what the store holds, then C3/C4: the document (an
    attachment upload: A3, and the staged blob)."""
    done = await _direct(request).complete(upload_id)
    if isinstance(done, StagedUpload):
        return JSONResponse(done.to_response(), status_code=201)
    return document_response(done, 201)


@router.delete("/uploads/{upload_id}", status_code=204, dependencies=[Depends(require("write"))],
               response_class=Response,
               responses={204: empty("Abandoned."), **problems(409, 410, 503)})
async def cancel_upload(request: Request, upload_id: str) -> Response:
    """Abandon a direct upload (its intent goes to the deletion path)."""
    await _direct(request).cancel(upload_id)
    return Response(status_code=204)
