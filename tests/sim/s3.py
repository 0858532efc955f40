"""S3 in memory, for the simulation: the service's side of the calls the real
:class:`blobledger.stores.s3.S3Store` makes (aiobotocore's client, answered here), so the
simulation runs the real S3 store's code over S3's semantics.

What S3 does that the other stores do not: a tag write replaces the whole set and has no
condition (the store compares first, then writes: two steps); a delete is conditioned on
the ETag alone (``If-Match``), never on a tag; ``If-None-Match: *`` makes a put and the
completion of a multipart upload create-only; a multipart upload carries the tags given at
its creation, its parts are referred to by their ETags, and every part but the last holds
at least 5 MiB. Errors are botocore's ``ClientError`` with S3's status and code, which the
store translates as it translates the real service's. Every call is an ``await`` (``point``:
the simulation's preemption, pause and crash point, named ``s3.<operation>``), and a write
may be followed by an injected fault (``after_write``: the write applied, its answer lost).
``tests/sim/test_store.py`` runs the store conformance suite on the store over it.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from botocore.exceptions import ClientError

from blobledger.stores.base import Capabilities
from blobledger.stores.s3 import S3Store
from tests.sim.store import Hook, _nothing

MIN_PART = 5 * 1024 * 1024
BUCKET = "sim-bucket"


def _error(status: int, code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, operation)


@dataclass
class _Object:
    data: bytes
    tags: dict[str, str]
    etag: str
    modified: datetime
    content_type: str | None


@dataclass
class _Upload:
    key: str
    tags: dict[str, str]
    content_type: str | None
    initiated: datetime
    parts: dict[int, tuple[str, bytes]] = field(default_factory=dict)


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data, self.offset = data, 0

    async def read(self, size: int) -> bytes:
        chunk = self.data[self.offset:self.offset + size]
        self.offset += len(chunk)
        return chunk

    def close(self) -> None:
        pass


class _Paginator:
    def __init__(self, service: S3Service, operation: str) -> None:
        self.service, self.operation = service, operation

    async def paginate(self, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        yield await getattr(self.service, self.operation)(**kwargs)


class S3Service:
    """The bucket's objects and multipart uploads, answered as S3 answers them."""

    def __init__(self, clock: Callable[[], datetime], point: Hook = _nothing,
                 after_write: Hook = _nothing) -> None:
        self.clock, self.point, self.after_write = clock, point, after_write
        self.objects: dict[str, _Object] = {}
        self.uploads: dict[str, _Upload] = {}
        self._ids = itertools.count(1)

    def _now(self) -> datetime:
        now = self.clock()
        return now if now.tzinfo else now.replace(tzinfo=UTC)

    def _object(self, key: str, operation: str) -> _Object:
        found = self.objects.get(key)
        if found is None:
            raise _error(404, "NoSuchKey", operation)
        return found

    def _upload(self, upload_id: str, operation: str) -> _Upload:
        found = self.uploads.get(upload_id)
        if found is None:
            raise _error(404, "NoSuchUpload", operation)
        return found

    def _etag(self, data: bytes) -> str:
        return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}-{next(self._ids)}"'

    # -- the bucket -----------------------------------------------------------------------
    async def head_bucket(self, **_: Any) -> dict[str, Any]:
        return {}

    async def create_bucket(self, **_: Any) -> dict[str, Any]:
        return {}

    # -- objects --------------------------------------------------------------------------
    async def put_object(self, *, Key: str, Body: bytes, IfNoneMatch: str | None = None,
                         Tagging: str = "", ContentType: str | None = None,
                         **_: Any) -> dict[str, Any]:
        await self.point("s3.put_object")
        if IfNoneMatch == "*" and Key in self.objects:
            raise _error(412, "PreconditionFailed", "PutObject")
        data = bytes(Body)
        etag = self._etag(data)
        self.objects[Key] = _Object(data, dict(parse_qsl(Tagging)), etag, self._now(),
                                    ContentType)
        await self.after_write("s3.put_object")
        return {"ETag": etag}

    async def head_object(self, *, Key: str, **_: Any) -> dict[str, Any]:
        await self.point("s3.head_object")
        found = self._object(Key, "HeadObject")
        return {"ContentLength": len(found.data), "LastModified": found.modified,
                "ETag": found.etag, "ContentType": found.content_type}

    async def get_object(self, *, Key: str, Range: str | None = None,
                         **_: Any) -> dict[str, Any]:
        await self.point("s3.get_object")
        found = self._object(Key, "GetObject")
        answer: dict[str, Any] = {"LastModified": found.modified, "ETag": found.etag,
                                  "ContentType": found.content_type}
        data = found.data
        if Range is not None:
            first, _dash, last = Range.removeprefix("bytes=").partition("-")
            start = int(first)
            if start >= len(data):
                raise _error(416, "InvalidRange", "GetObject")
            end = min(len(data) - 1, int(last)) if last else len(data) - 1
            answer["ContentRange"] = f"bytes {start}-{end}/{len(data)}"
            data = data[start:end + 1]
        return {**answer, "ContentLength": len(data), "Body": _Body(data)}

    async def get_object_tagging(self, *, Key: str, **_: Any) -> dict[str, Any]:
        await self.point("s3.get_object_tagging")
        tags = self._object(Key, "GetObjectTagging").tags
        return {"TagSet": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}

    async def put_object_tagging(self, *, Key: str, Tagging: dict[str, Any],
                                 **_: Any) -> dict[str, Any]:
        """The whole set replaced, with no condition."""
        await self.point("s3.put_object_tagging")
        self._object(Key, "PutObjectTagging").tags = {
            t["Key"]: t["Value"] for t in Tagging["TagSet"]}
        await self.after_write("s3.put_object_tagging")
        return {}

    async def delete_object(self, *, Key: str, IfMatch: str | None = None,
                            **_: Any) -> dict[str, Any]:
        await self.point("s3.delete_object")
        found = self._object(Key, "DeleteObject")
        if IfMatch is not None and IfMatch != found.etag:
            raise _error(412, "PreconditionFailed", "DeleteObject")
        del self.objects[Key]
        await self.after_write("s3.delete_object")
        return {}

    async def list_objects_v2(self, *, Prefix: str = "", **_: Any) -> dict[str, Any]:
        await self.point("s3.list_objects_v2")
        keys = sorted(k for k in self.objects if k.startswith(Prefix))
        return {"Contents": [{"Key": k, "Size": len(self.objects[k].data),
                              "LastModified": self.objects[k].modified,
                              "ETag": self.objects[k].etag} for k in keys]}

    def get_paginator(self, operation: str) -> _Paginator:
        return _Paginator(self, operation)

    # -- multipart uploads ----------------------------------------------------------------
    async def create_multipart_upload(self, *, Key: str, Tagging: str = "",
                                      ContentType: str | None = None,
                                      **_: Any) -> dict[str, Any]:
        await self.point("s3.create_multipart_upload")
        upload_id = f"upload-{next(self._ids)}"
        self.uploads[upload_id] = _Upload(Key, dict(parse_qsl(Tagging)), ContentType,
                                          self._now())
        return {"UploadId": upload_id}

    async def upload_part(self, *, UploadId: str, PartNumber: int, Body: bytes,
                          **_: Any) -> dict[str, Any]:
        await self.point("s3.upload_part")
        data = bytes(Body)
        etag = self._etag(data)
        self._upload(UploadId, "UploadPart").parts[PartNumber] = (etag, data)
        return {"ETag": etag}

    async def complete_multipart_upload(
        self, *, Key: str, UploadId: str, MultipartUpload: dict[str, Any],
        IfNoneMatch: str | None = None, **_: Any,
    ) -> dict[str, Any]:
        await self.point("s3.complete_multipart_upload")
        upload = self._upload(UploadId, "CompleteMultipartUpload")
        if IfNoneMatch == "*" and Key in self.objects:
            raise _error(412, "PreconditionFailed", "CompleteMultipartUpload")
        listed = MultipartUpload["Parts"]
        chunks = []
        for i, part in enumerate(listed):
            held = upload.parts.get(int(part["PartNumber"]))
            if held is None or held[0] != part["ETag"]:
                raise _error(400, "InvalidPart", "CompleteMultipartUpload")
            if i < len(listed) - 1 and len(held[1]) < MIN_PART:
                raise _error(400, "EntityTooSmall", "CompleteMultipartUpload")
            chunks.append(held[1])
        data = b"".join(chunks)
        etag = self._etag(data)
        self.objects[Key] = _Object(data, dict(upload.tags), etag, self._now(),
                                    upload.content_type)
        del self.uploads[UploadId]
        await self.after_write("s3.complete_multipart_upload")
        return {"ETag": etag}

    async def abort_multipart_upload(self, *, UploadId: str, **_: Any) -> dict[str, Any]:
        await self.point("s3.abort_multipart_upload")
        self._upload(UploadId, "AbortMultipartUpload")
        del self.uploads[UploadId]
        return {}

    async def list_parts(self, *, UploadId: str, **_: Any) -> dict[str, Any]:
        await self.point("s3.list_parts")
        upload = self._upload(UploadId, "ListParts")
        return {"Parts": [{"PartNumber": n, "ETag": e, "Size": len(d)}
                          for n, (e, d) in sorted(upload.parts.items())]}

    async def list_multipart_uploads(self, *, Prefix: str = "",
                                     **_: Any) -> dict[str, Any]:
        await self.point("s3.list_multipart_uploads")
        return {"Uploads": [{"Key": u.key, "UploadId": i, "Initiated": u.initiated}
                            for i, u in sorted(self.uploads.items())
                            if u.key.startswith(Prefix)]}

    async def generate_presigned_url(self, operation: str, Params: dict[str, Any],
                                     **_: Any) -> str:
        return f"https://{BUCKET}.s3.sim/{Params['Key']}?signed"


def s3_memory_store(service: S3Service, *, unfenced_sweeps: bool = False) -> S3Store:
    """The real S3 store over ``service``. ``unfenced_sweeps``: the store claims that its
    delete sees the ``state`` tag (it does not): the sweeper then deletes under the tag
    comparison the store makes itself, as it did before it fenced the row first (the
    paused S3 sweeper's bug)."""
    store = S3Store(BUCKET, single_put_limit=256 * 1024)
    store._s3 = service
    if unfenced_sweeps:
        store.capabilities = Capabilities(state_conditioned_transition=False,
                                          min_part_size=MIN_PART)
    return store
