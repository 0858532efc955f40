"""``/buckets``: create, list, show, change and delete buckets (the ``admin`` scope changes
them), and ``/buckets/{bucket}/documents``: a bucket's documents, created and listed as
``/documents`` does for the default bucket (docs/buckets.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from blobledger.api.auth import require
from blobledger.api.openapi import empty, json_body, problems
from blobledger.api.openapi import headers as header_docs
from blobledger.api.routes import ledger_of
from blobledger.api.routes.documents import CREATE_BODY, ETAG, PAGE, create_in, page_of
from blobledger.protocol.buckets import CANNED_ACLS, Bucket
from blobledger.protocol.documents import Document

router = APIRouter(tags=["buckets"])

BucketName = Annotated[str, Path(min_length=1, max_length=63,
                                 description="the bucket's name (3-63 of a-z, 0-9, '.', '-')")]
BUCKET = {"type": "object",
          "required": ["name", "max_object_bytes", "content_types", "hold", "quota_bytes",
                       "quota_objects", "acl", "owner", "created_at"],
          "properties": {
              "name": {"type": "string"},
              "max_object_bytes": {"type": ["integer", "null"],
                                   "description": "the largest object (bytes); null: the "
                                   "service's BLOBLEDGER_MAX_UPLOAD_BYTES"},
              "content_types": {"type": "array", "items": {"type": "string"},
                                "description": "media types or type/* allowed; empty: any"},
              "hold": {"type": "boolean", "description": "every creation is held"},
              "quota_bytes": {"type": ["integer", "null"]},
              "quota_objects": {"type": ["integer", "null"]},
              "acl": {"enum": list(CANNED_ACLS), "description": "who reads (and writes) "
                      "the bucket without a credential (docs/buckets.md)"},
              "owner": {"type": ["string", "null"], "description": "the S3 access key that "
                        "created it; null: none"},
              "created_at": {"type": "string"},
              "usage": {"type": "object", "properties": {
                  "objects": {"type": "integer"}, "bytes": {"type": "integer"}}}}}
#: a bucket's canned ACL
Acl = Literal["private", "public-read", "public-read-write", "authenticated-read"]
BUCKETS = {"type": "object", "required": ["items"],
           "properties": {"items": {"type": "array", "items": BUCKET}}}


class BucketSettings(BaseModel):
    """A bucket's settings (each absent or null: no limit of its own)."""

    model_config = ConfigDict(extra="forbid")

    max_object_bytes: int | None = Field(default=None, ge=0)
    content_types: list[str] = Field(default_factory=list, max_length=64)
    hold: bool = False
    quota_bytes: int | None = Field(default=None, ge=0)
    quota_objects: int | None = Field(default=None, ge=0)
    acl: Acl = "private"


class NewBucket(BucketSettings):
    name: str = Field(min_length=1, max_length=63)


class BucketChange(BaseModel):
    """The settings to change (an absent one stays; null lifts a limit)."""

    model_config = ConfigDict(extra="forbid")

    max_object_bytes: int | None = Field(default=None, ge=0)
    content_types: list[str] | None = Field(default=None, max_length=64)
    hold: bool | None = None
    quota_bytes: int | None = Field(default=None, ge=0)
    quota_objects: int | None = Field(default=None, ge=0)
    acl: Acl | None = None


async def _shown(request: Request, bucket: Bucket) -> dict[str, Any]:
    usage = await ledger_of(request).buckets.usage(bucket.name)
    return {**bucket.to_json(), "usage": {"objects": usage.objects, "bytes": usage.bytes}}


@router.get("/buckets", responses={200: json_body("The buckets the token reaches.", BUCKETS),
                                   **problems(503)},
            dependencies=[Depends(require("read"))])
async def list_buckets(request: Request) -> dict[str, Any]:
    """Every bucket the token reaches, in name order."""
    return {"items": [b.to_json() for b in await ledger_of(request).buckets.list()]}


@router.post("/buckets", status_code=201,
             responses={201: json_body("The bucket.", BUCKET, Location="the bucket's URL"),
                        **problems(400, 403, 409, 503)},
             dependencies=[Depends(require("admin"))])
async def create_bucket(request: Request, body: NewBucket) -> Response:
    """A new bucket with its settings (admin scope; a token limited to some buckets creates
    only those)."""
    bucket = await ledger_of(request).buckets.create(body.name, **body.model_dump(
        exclude={"name"}))
    return JSONResponse(await _shown(request, bucket), status_code=201,
                        headers={"Location": f"/buckets/{bucket.name}"})


@router.get("/buckets/{bucket}", responses={200: json_body("The bucket and its usage.",
                                                           BUCKET), **problems(404, 503)},
            dependencies=[Depends(require("read"))])
async def show_bucket(request: Request, bucket: BucketName) -> dict[str, Any]:
    """The bucket's settings and what it holds (documents pending, held and ready)."""
    return await _shown(request, await ledger_of(request).buckets.get(bucket))


@router.patch("/buckets/{bucket}", responses={200: json_body("The bucket.", BUCKET),
                                              **problems(400, 404, 503)},
              dependencies=[Depends(require("admin"))])
async def change_bucket(request: Request, bucket: BucketName,
                        body: BucketChange) -> dict[str, Any]:
    """Change some of the bucket's settings (admin scope)."""
    changed = await ledger_of(request).buckets.update(
        bucket, **body.model_dump(exclude_unset=True))
    return await _shown(request, changed)


@router.delete("/buckets/{bucket}", status_code=204,
               responses={204: empty("Deleted."), **problems(400, 404, 409, 503)},
               dependencies=[Depends(require("admin"))])
async def delete_bucket(request: Request, bucket: BucketName) -> Response:
    """Remove an empty bucket (admin scope): 409 ``bucket-not-empty`` while it holds any
    document, pending, held or ready; the default bucket stays."""
    await ledger_of(request).buckets.delete(bucket)
    return Response(status_code=204)


@router.post(
    "/buckets/{bucket}/documents", status_code=201, openapi_extra=CREATE_BODY,
    responses={201: {"model": Document, "description": "The document, ready (or held).",
                     "headers": header_docs(ETag=ETAG, Location="the document's URL")},
               **problems(403, 404, 409, 413, 415, 422, 429, 502, 503)},
    dependencies=[Depends(require("write"))],
)
async def create_bucket_document(
    request: Request,
    bucket: BucketName,
    name: Annotated[str | None, Query(description="the name, for a raw body")] = None,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
    repr_digest: Annotated[str | None, Header(alias="Repr-Digest")] = None,
    content_md5: Annotated[str | None, Header(alias="Content-MD5")] = None,
    hold: Annotated[bool, Query()] = False,
) -> Response:
    """Create a document in the bucket, as ``POST /documents`` does in the default one; the
    bucket's settings apply (media types 415, largest object 413, quota 413)."""
    return await create_in(request, bucket, idempotency_key, repr_digest, content_md5, hold)


@router.get("/buckets/{bucket}/documents",
            responses={200: json_body("A page of the bucket's documents.", PAGE),
                       **problems(404, 503)},
            dependencies=[Depends(require("read"))])
async def list_bucket_documents(
    request: Request,
    bucket: BucketName,
    prefix: Annotated[str, Query(max_length=1024)] = "",
    cursor: Annotated[str | None, Query(max_length=2048)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """The bucket's ready documents in name order, a page at a time."""
    await ledger_of(request).buckets.get(bucket)  # 404 for a bucket that is not there
    return await page_of(request, bucket, cursor, limit)
