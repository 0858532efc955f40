"""The S3 store's reads: an object's tags (its checksums kept apart), its bytes (a range,
read in chunks), the listing (tags fetched alongside, a few at once), and the multipart
uploads left open (listed, and aborted)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from blobledger import failpoints
from blobledger.errors import BlobNotFound
from blobledger.stores.base import BlobInfo, BlobReader, Store, UncommittedInfo

GET_CHUNK = 256 * 1024
CONCURRENCY = 16  # per-object requests in flight (tags while listing, deletes in a batch)
CHECKSUM_TAGS = ("sha256", "md5")


def _tags_of(response: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in response.get("TagSet", [])}


def _visible(tags: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k not in CHECKSUM_TAGS}


class Reads(Store):
    """Tags, bytes and listings."""

    if TYPE_CHECKING:  # the store's own (:class:`~blobledger.stores.s3.store.S3Store`)
        bucket: str
        root: str

        async def _client(self) -> Any: ...

        def _key(self, name: str) -> str: ...

        def _mapped(self, name: str, *, put: bool = False) -> AbstractContextManager[None]: ...

    # -- metadata -------------------------------------------------------------------------
    async def _all_tags(self, name: str) -> dict[str, str]:
        s3 = await self._client()
        with self._mapped(name):
            return _tags_of(await s3.get_object_tagging(Bucket=self.bucket,
                                                        Key=self._key(name)))

    # -- reads ----------------------------------------------------------------------------
    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        s3 = await self._client()
        key = self._key(name)
        if length == 0:
            with self._mapped(name):
                head = await s3.head_object(Bucket=self.bucket, Key=key)
            info = BlobInfo(name=name, size=int(head["ContentLength"]),
                            last_modified=head["LastModified"], etag=str(head["ETag"]),
                            content_type=head.get("ContentType"))
            return BlobReader(info, start, 0, _empty())
        extra = {}
        if start or length is not None:
            end = "" if length is None else str(start + length - 1)
            extra["Range"] = f"bytes={start}-{end}"
        with self._mapped(name):
            response = await s3.get_object(Bucket=self.bucket, Key=key, **extra)
        total = int(response["ContentLength"])
        if "ContentRange" in response:
            total = int(str(response["ContentRange"]).rsplit("/", 1)[1])
        info = BlobInfo(name=name, size=total, last_modified=response["LastModified"],
                        etag=str(response["ETag"]), content_type=response.get("ContentType"))
        return BlobReader(info, start, int(response["ContentLength"]),
                          self._chunks(name, response["Body"]))

    async def _chunks(self, name: str, body: Any) -> AsyncIterator[bytes]:
        try:
            while True:
                with self._mapped(name):
                    chunk = await body.read(GET_CHUNK)
                if not chunk:
                    return
                yield chunk
        finally:
            body.close()

    async def list(
        self, prefix: str = "", *, tags: bool = True, checksums: bool = True
    ) -> AsyncIterator[BlobInfo]:
        """ListObjectsV2 (UTF-8 byte order, which is code point order); tags and checksums
        cost one GetObjectTagging per object, fetched ``CONCURRENCY`` at once per page."""
        s3 = await self._client()
        paginator = s3.get_paginator("list_objects_v2")
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def tagged(name: str) -> dict[str, str] | None:
            async with semaphore:
                try:
                    return await self._all_tags(name)
                except BlobNotFound:
                    return None

        with self._mapped(self.bucket):
            pages = paginator.paginate(Bucket=self.bucket, Prefix=self.root + prefix)
            async for page in pages:
                objects = [o for o in page.get("Contents", [])
                           if str(o["Key"]).startswith(self.root)]
                names = [str(o["Key"])[len(self.root):] for o in objects]
                found: list[dict[str, str] | None] = [None] * len(objects)
                if tags or checksums:
                    found = list(await asyncio.gather(*(tagged(n) for n in names)))
                for obj, name, all_tags in zip(objects, names, found, strict=True):
                    if (tags or checksums) and all_tags is None:
                        continue  # deleted since the page was listed
                    all_tags = all_tags or {}
                    yield BlobInfo(
                        name=name, size=int(obj["Size"]), last_modified=obj["LastModified"],
                        etag=str(obj["ETag"]),
                        sha256=all_tags.get("sha256") if checksums else None,
                        md5=all_tags.get("md5") if checksums else None,
                        tags=_visible(all_tags) if tags else None)

    async def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        """Incomplete multipart uploads, one entry per name (their parts and bytes). An
        upload aborted or completed since the listing (a sweep, a tus termination or
        publication) is left out, and a name none of whose uploads is left is skipped."""
        s3 = await self._client()
        paginator = s3.get_paginator("list_multipart_uploads")
        by_key: dict[str, list[dict[str, Any]]] = {}
        with self._mapped(self.bucket):
            async for page in paginator.paginate(Bucket=self.bucket,
                                                 Prefix=self.root + prefix):
                for upload in page.get("Uploads", []):
                    by_key.setdefault(str(upload["Key"]), []).append(upload)
        for key in sorted(by_key):
            name = key[len(self.root):]
            await failpoints.hit("scan.uncommitted")
            parts = size = 0
            started: datetime | None = None
            left = False
            for upload in by_key[key]:
                try:
                    with self._mapped(name):
                        listed = await s3.list_parts(Bucket=self.bucket, Key=key,
                                                     UploadId=upload["UploadId"])
                except BlobNotFound:  # NoSuchUpload: gone since the listing
                    continue
                left = True
                parts += len(listed.get("Parts", []))
                size += sum(int(p["Size"]) for p in listed.get("Parts", []))
                initiated = upload.get("Initiated")
                if isinstance(initiated, datetime):
                    started = initiated if started is None else min(started, initiated)
            if not left:
                continue
            try:
                with self._mapped(name):
                    await s3.head_object(Bucket=self.bucket, Key=key)
                committed = True
            except BlobNotFound:
                committed = False
            yield UncommittedInfo(name=name, blocks=parts, size=size, committed=committed,
                                  last_modified=started.astimezone(UTC) if started else None)

    async def discard_uncommitted(self, name: str) -> bool:
        """Abort the incomplete multipart uploads under ``name``: the service never lets an
        abort touch a completed object."""
        s3 = await self._client()
        key = self._key(name)
        with self._mapped(name):
            listed = await s3.list_multipart_uploads(Bucket=self.bucket, Prefix=key)
        removed = False
        for upload in listed.get("Uploads", []):
            if upload["Key"] == key:
                with contextlib.suppress(BlobNotFound), self._mapped(name):
                    await s3.abort_multipart_upload(Bucket=self.bucket, Key=key,
                                                    UploadId=upload["UploadId"])
                    removed = True
        return removed


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover
