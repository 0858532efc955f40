"""``/files/``: resumable uploads, tus 1.0 (core, creation, creation-with-upload, checksum,
termination, expiration) over :class:`blobledger.uploads.resumable.Resumable`.

This module only speaks HTTP: it parses and answers tus headers and maps errors to tus
statuses (409 offset mismatch, 413 past the declared length, 460 checksum mismatch, 410 an
expired or swept upload); the protocol's steps live in ``resumable.py``. The upload's
metadata names the document (``name`` or ``filename``) and may give its content type
(``content_type`` or ``filetype``) and whole-file ``sha256`` (hex). A completed upload
answers with ``Blobledger-Document: <id>``; ``Location`` only ever names the upload. A
malformed tus header is a 400 problem: numbers are ASCII digits (at most 19), metadata and
checksums ASCII.

The metadata key ``attachment`` (any value) makes the upload stage an attachment: no
document name (``filename`` or ``name`` is the blob's filename, optional), an optional
``target`` for the application, and completion (the last PATCH, or a creation with the whole
body) runs A3, not C3/C4, and answers ``Blobledger-Attachment: <blob name>``. The
application attaches it with ``Ledger.staged_upload(<upload id>)``.
"""

from __future__ import annotations

import base64
import binascii
from email.utils import format_datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request, Response

from blobledger.api.auth import require, scopes_presented
from blobledger.api.openapi import empty, header_parameter, problems, raw_request
from blobledger.api.problems import Problem
from blobledger.api.routes import ledger_of, location_for, settings_of, upload_owner
from blobledger.api.uploads import body_stream, declared_length
from blobledger.errors import IntegrityError, IntentLost, OffsetMismatch
from blobledger.protocol.attachments import StagedUpload
from blobledger.protocol.documents import Document
from blobledger.protocol.models import UploadState, as_utc
from blobledger.protocol.transitions.records import UploadRecord
from blobledger.uploads.resumable import CHECKSUMS, Checksum, Resumable

router = APIRouter(tags=["resumable uploads (tus)"])

TUS_VERSION = "1.0.0"
EXTENSIONS = "creation,creation-with-upload,checksum,termination,expiration"
OFFSET_TYPE = "application/offset+octet-stream"
DOCUMENT_HEADER = "Blobledger-Document"
ATTACHMENT_HEADER = "Blobledger-Attachment"
#: browsers may read these headers of a cross-origin answer
EXPOSED = ("Upload-Offset, Upload-Length, Upload-Expires, Upload-Metadata, Location, "
           "Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Blobledger-Document, "
           "Blobledger-Attachment")


# -- the OpenAPI document -----------------------------------------------------------------
NUMBER = {"type": "string", "pattern": "^[0-9]{1,19}$"}
TUS_RESUMABLE = header_parameter("Tus-Resumable", f"`{TUS_VERSION}` (412 otherwise)",
                                 required=True, schema={"type": "string", "enum": [TUS_VERSION]})
CHUNK = "the next bytes of the upload, from Upload-Offset"
CREATE_EXTRA = raw_request(
    f"Optionally the upload's first bytes (creation-with-upload, `{OFFSET_TYPE}`).",
    (OFFSET_TYPE,), required=False,
    parameters=[TUS_RESUMABLE, header_parameter("Upload-Length", "the upload's size in bytes",
                                                required=True, schema=NUMBER)])
PATCH_EXTRA = raw_request(
    CHUNK, (OFFSET_TYPE,),
    parameters=[TUS_RESUMABLE, header_parameter("Upload-Offset", "where the bytes go",
                                                required=True, schema=NUMBER)])
TUS_EXTRA: dict[str, object] = {"parameters": [TUS_RESUMABLE]}
WHERE = {"Upload_Offset": "the bytes received", "Upload_Expires": "when an unfinished upload "
         "is swept", "Tus_Resumable": TUS_VERSION}
DONE = {DOCUMENT_HEADER.replace("-", "_"): "the document's id, once complete",
        ATTACHMENT_HEADER.replace("-", "_"): "the staged blob, for an attachment upload"}


def _resumable(request: Request) -> Resumable:
    existing = getattr(request.app.state, "resumable", None)
    ledger = ledger_of(request)
    if not isinstance(existing, Resumable) or existing.ledger is not ledger:
        existing = Resumable(ledger)
        request.app.state.resumable = existing
    return existing


def _headers(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"Tus-Resumable": TUS_VERSION, "Access-Control-Expose-Headers": EXPOSED,
            **(extra or {})}


def _check_version(request: Request) -> None:
    if request.headers.get("tus-resumable") != TUS_VERSION:
        raise Problem(412, "tus-version", f"Tus-Resumable must be {TUS_VERSION}",
                      headers={"Tus-Version": TUS_VERSION})


def parse_metadata(value: str | None) -> dict[str, str]:
    """``Upload-Metadata``: comma-separated ``key base64value`` pairs (400 if malformed)."""
    meta: dict[str, str] = {}
    if not value:
        return meta
    if not value.isascii():
        raise Problem(400, "invalid-metadata", "Upload-Metadata must be ASCII")
    for pair in value.split(","):
        parts = pair.strip().split(" ")
        if not parts[0] or len(parts) > 2 or parts[0] in meta:
            raise Problem(400, "invalid-metadata", "Upload-Metadata is malformed")
        try:
            meta[parts[0]] = base64.b64decode(parts[1], validate=True).decode() \
                if len(parts) == 2 else ""
        except (binascii.Error, UnicodeDecodeError):
            raise Problem(400, "invalid-metadata",
                          f"Upload-Metadata value of {parts[0]!r} is not base64 UTF-8") from None
    return meta


def format_metadata(meta: dict[str, str]) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" if v else k
                    for k, v in meta.items())


#: the most digits an offset or length may have (a 64-bit count of bytes)
MAX_DIGITS = 19


def _number(request: Request, header: str) -> int:
    """A non-negative integer header: ASCII digits only (never ``²``), at most
    :data:`MAX_DIGITS` of them."""
    value = request.headers.get(header)
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > MAX_DIGITS:
        raise Problem(400, "invalid-input", f"{header} must be a non-negative integer "
                      f"of at most {MAX_DIGITS} digits")
    return int(value)


def _checksum(value: str | None) -> Checksum | None:
    if value is None:
        return None
    if not value.isascii():
        raise Problem(400, "invalid-input", "Upload-Checksum must be ASCII")
    algorithm, _, encoded = value.strip().partition(" ")
    if algorithm not in CHECKSUMS:
        raise Problem(400, "unsupported-checksum",
                      f"Upload-Checksum algorithm must be one of {', '.join(CHECKSUMS)}")
    try:
        return Checksum(algorithm, base64.b64decode(encoded, validate=True))
    except binascii.Error:
        raise Problem(400, "invalid-input", "Upload-Checksum is not base64") from None


def _expires(upload: UploadRecord) -> str:
    return format_datetime(as_utc(upload.expires_at), usegmt=True)


def _done(doc: Document | StagedUpload, offset: int) -> dict[str, str]:
    """What a completed upload made, named by its own header: never ``Location``, which in
    a tus answer is the upload's (a client terminates what ``Location`` names)."""
    if isinstance(doc, StagedUpload):
        return {"Upload-Offset": str(offset), ATTACHMENT_HEADER: doc.name}
    return {"Upload-Offset": str(offset), DOCUMENT_HEADER: doc.id}


@router.options("/files/", include_in_schema=False)
@router.options("/files/{upload_id}", include_in_schema=False)
async def tus_options(request: Request) -> Response:
    """What this tus server offers. A CORS preflight from one of
    ``BLOBLEDGER_CORS_ORIGINS`` is answered before it gets here; any other origin is never
    named (the browser then sends nothing)."""
    headers = _headers({
        "Tus-Version": TUS_VERSION, "Tus-Extension": EXTENSIONS,
        "Tus-Max-Size": str(settings_of(request).max_upload_bytes),
        "Tus-Checksum-Algorithm": ",".join(CHECKSUMS),
    })
    return Response(status_code=204, headers=headers)


@router.post("/files/", status_code=201, dependencies=[Depends(require("write"))],
             response_class=Response, openapi_extra=CREATE_EXTRA,
             responses={201: empty("The upload, created.", Location="the upload's URL",
                                   **WHERE, **DONE),
                        **problems(409, 412, 413, 429, 460, 502, 503)})
async def tus_create(
    request: Request,
    upload_metadata: Annotated[str | None, Header(alias="Upload-Metadata")] = None,
    upload_checksum: Annotated[str | None, Header(alias="Upload-Checksum")] = None,
) -> Response:
    """Create an upload (C1): ``Upload-Length`` bytes, named by its metadata; a body with
    ``Content-Type: application/offset+octet-stream`` is its first part. An empty upload
    is completed here (C3/C4, or A3)."""
    _check_version(request)
    if "upload-defer-length" in request.headers:
        raise Problem(400, "unsupported", "Upload-Defer-Length is not supported")
    length = _number(request, "upload-length")
    resumable = _resumable(request)
    upload = await resumable.create(length, parse_metadata(upload_metadata),
                                    upload_owner(request))
    location = location_for(request, "tus_head", upload_id=upload.id)
    headers = _headers({"Upload-Expires": _expires(upload)})
    if request.headers.get("content-type") == OFFSET_TYPE:
        offset, doc = await _append(request, resumable, upload, 0, upload_checksum)
        headers["Upload-Offset"] = str(offset)
        if doc is not None:
            headers.update(_done(doc, offset))
    elif length == 0:  # complete already: tus clients send no PATCH for an empty file
        headers.update(_done(await resumable.complete(upload), 0))
    headers["Location"] = location  # the upload's, also when complete (tus clients HEAD it)
    return Response(status_code=201, headers=headers)


@router.head("/files/{upload_id}", name="tus_head", dependencies=[Depends(require("read"))],
             response_class=Response, openapi_extra=TUS_EXTRA,
             responses={200: empty("The upload's state.", **WHERE, **DONE,
                                   Upload_Length="its size",
                                   Upload_Metadata="its metadata"),
                        **problems(404, 410, 412, 502, 503)})
async def tus_head(request: Request, upload_id: str) -> Response:
    """The durable offset. A complete upload whose completion was interrupted (a killed
    server) is completed here, for a caller that may write: a read token changes nothing
    (it is told the offset, and no document until a writer completes the upload)."""
    _check_version(request)
    resumable = _resumable(request)
    upload = await resumable.find(upload_id)
    headers = _headers({"Upload-Offset": str(upload.offset),
                        "Upload-Length": str(upload.length), "Cache-Control": "no-store",
                        "Upload-Metadata": format_metadata(upload.meta),
                        "Upload-Expires": _expires(upload)})
    doc: Document | StagedUpload | None = None
    if upload.state == UploadState.OPEN and upload.offset == upload.length \
            and "write" in scopes_presented(request):
        doc = await resumable.complete(upload)
    elif upload.state == UploadState.DONE:
        doc = await resumable.document(upload)
    if doc is not None:
        headers.update(_done(doc, upload.offset))
    return Response(status_code=200, headers=headers)


@router.patch("/files/{upload_id}", status_code=204, dependencies=[Depends(require("write"))],
              response_class=Response, openapi_extra=PATCH_EXTRA,
              responses={204: empty("The bytes, recorded.", **WHERE, **DONE),
                         **problems(404, 409, 410, 412, 413, 415, 460, 502, 503)})
async def tus_patch(
    request: Request,
    upload_id: str,
    upload_checksum: Annotated[str | None, Header(alias="Upload-Checksum")] = None,
) -> Response:
    """Append the body at ``Upload-Offset``; the upload completes (C3/C4, or A3 for an
    attachment) with its last byte."""
    _check_version(request)
    if request.headers.get("content-type") != OFFSET_TYPE:
        raise Problem(415, "unsupported-media-type", f"Content-Type must be {OFFSET_TYPE}")
    offset = _number(request, "upload-offset")
    resumable = _resumable(request)
    upload = await resumable.find(upload_id)
    try:
        new_offset, doc = await _append(request, resumable, upload, offset, upload_checksum)
    except OffsetMismatch as exc:  # tus: 409 with the offset the server holds
        raise Problem(409, "offset-mismatch", str(exc),
                      headers=_headers({"Upload-Offset": str(exc.offset)})) from None
    headers = _headers({"Upload-Offset": str(new_offset), "Upload-Expires": _expires(upload)})
    if doc is not None:
        headers.update(_done(doc, new_offset))
    return Response(status_code=204, headers=headers)


@router.delete("/files/{upload_id}", status_code=204, dependencies=[Depends(require("write"))],
               response_class=Response, openapi_extra=TUS_EXTRA,
               responses={204: empty("Terminated (or finished already).",
                                     Tus_Resumable=TUS_VERSION),
                          **problems(404, 409, 410, 412, 503)})
async def tus_delete(request: Request, upload_id: str) -> Response:
    """Terminate an upload: its intent and parts are dropped. A finished upload has nothing
    left to terminate: 204, and nothing is deleted (its document, or staged blob, stays;
    ``DELETE /documents/{id}`` deletes a document); so is one whose completion finished
    while this request terminated it."""
    _check_version(request)
    resumable = _resumable(request)
    upload = await resumable.find(upload_id)
    if upload.state == UploadState.OPEN:
        try:
            await resumable.terminate(upload)
        except IntentLost:
            again = await resumable.ledger.transitions.find_upload(upload_id)
            if again is None or again.state != UploadState.DONE:
                raise  # swept meanwhile
    return Response(status_code=204, headers=_headers())


async def _append(
    request: Request, resumable: Resumable, upload: UploadRecord, offset: int,
    checksum_header: str | None,
) -> tuple[int, Document | StagedUpload | None]:
    checksum = _checksum(checksum_header)
    declared = declared_length(request)
    remaining = max(upload.length - offset, 0)
    if declared is not None and declared > remaining and upload.state == UploadState.OPEN \
            and offset == upload.offset:
        raise Problem(413, "upload-too-large",
                      f"{declared} bytes from offset {offset} pass the declared length "
                      f"{upload.length}")
    body = body_stream(request, declared, remaining)
    try:
        new_offset = await resumable.append(upload, offset, body, declared, checksum)
    except IntegrityError as exc:
        if checksum is None:
            raise
        raise Checksum460(str(exc)) from None
    if new_offset == upload.length and upload.state == UploadState.OPEN:
        fresh = await resumable.find(upload.id)
        if fresh.state == UploadState.OPEN:
            return new_offset, await resumable.complete(fresh)
        return new_offset, await resumable.document(fresh)
    return new_offset, None


class Checksum460(Problem):
    """tus's 460 Checksum Mismatch: nothing of the request was recorded."""

    def __init__(self, detail: str) -> None:
        super().__init__(460, "checksum-mismatch", detail)
