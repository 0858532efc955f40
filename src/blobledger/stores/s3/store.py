"""The S3 backend (``s3://bucket[/prefix]``), on aiobotocore, for AWS and S3-compatible
services (``BLOBLEDGER_S3_ENDPOINT_URL``).

Create-only is ``If-None-Match: *`` on PutObject and on CompleteMultipartUpload. A body up
to the single-put limit (``BLOBLEDGER_S3_SINGLE_PUT_LIMIT``, 8 MiB) is read whole and sent
as one PutObject; a larger one streams as a multipart upload, a bounded window of parts in
memory; a failed or cancelled multipart upload is aborted. The ``state`` tag is an object
tag; the SHA-256 and MD5 are object tags too (``sha256``, ``md5``: a multipart upload learns
them only at its end, and tags, unlike metadata, can be written after it), written with a
single put, and for a multipart or direct upload with the retag to ``committed``
(:meth:`S3Store.set_tags`). S3's tag write replaces the whole set without a condition, so
nothing here ever writes a set it read before another actor could have retagged:
``set_tags`` is the only tag write after creation. A blob whose checksum tags are not
written yet is hashed by :meth:`stat`, never retagged there. Checksum tags are never shown
as tags.

S3 has no delete (or tag update) conditioned on a tag. A delete here reads the tag and the
ETag, compares the tag, then deletes with ``If-Match`` on that ETag: S3 itself refuses to
delete other bytes than those checked, while the tag comparison rests on the database fence
(the sweeper and the deletion path win the row's compare-and-set before they delete, so no
writer can commit that blob afterwards). ``docs/backends.md`` has the table. botocore errors
become blobledger errors in :func:`~blobledger.stores.s3.errors.map_errors` and nowhere else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
from collections.abc import AsyncIterable, Mapping, Sequence
from contextlib import AbstractContextManager, AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

from blobledger import failpoints
from blobledger._base.disposition import content_disposition, signed_cache_control
from blobledger._base.names import check_blob_name
from blobledger.config import Settings
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    Digests,
    StoreError,
    StoreMissing,
    StoreUnavailable,
)
from blobledger.stores.base import (
    BlobInfo,
    ByteReader,
    Capabilities,
    Condition,
    DeleteOutcome,
    DirectPut,
    Hasher,
    SignedRead,
    Tags,
    tags_match,
    verify,
)
from blobledger.stores.limits import StoreLimits
from blobledger.stores.resilience import Breaker
from blobledger.stores.s3.errors import _status, map_errors, translate
from blobledger.stores.s3.reads import CHECKSUM_TAGS, CONCURRENCY, Reads, _empty, _visible
from blobledger.stores.s3.settings import S3Settings

#: the largest body sent as one PutObject (``BLOBLEDGER_S3_SINGLE_PUT_LIMIT``), by default
SINGLE_PUT_LIMIT: int = S3Settings.model_fields["single_put_limit"].default
PART_SIZE = 8 * 1024 * 1024  # S3 wants at least 5 MiB for every part but the last
MIN_PART_SIZE = 5 * 1024 * 1024
#: a put's multipart parts uploading at once (a bounded window: at most this many parts'
#: bytes held in memory beside the one being read and hashed)
PARTS_IN_FLIGHT = 4
KNOWN_DIGESTS = 4096  # checksums of objects this process stored or hashed, for their retag
#: botocore's data loaders, one per data path, shared by every store of the process: a loader
#: caches the service model, endpoint rules and partitions it parsed (about half a second of
#: JSON per session otherwise, paid again by every store that opens a client)
_LOADERS: dict[str | None, Any] = {}


def _data_loader(data_path: str | None) -> Any:
    loader = _LOADERS.get(data_path)
    if loader is None:
        from botocore.loaders import create_loader

        loader = _LOADERS[data_path] = create_loader(data_path)
    return loader


def _tag_set(tags: Mapping[str, str]) -> dict[str, list[dict[str, str]]]:
    return {"TagSet": [{"Key": k, "Value": v} for k, v in sorted(tags.items())]}


def _md5_header(md5_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(md5_hex)).decode()


class S3Store(Reads):
    """Objects in one bucket, under an optional key prefix."""

    #: S3 refuses overwrites and deletes of changed bytes; it has no tag conditions
    SERVICE = Capabilities(state_conditioned_delete=False,
                           state_conditioned_transition=False, min_part_size=MIN_PART_SIZE)

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        path_style: bool = False,
        access_key: str | None = None,
        secret_key: str | None = None,
        profile: str | None = None,
        single_put_limit: int | None = None,
        part_size: int = PART_SIZE,
        capabilities: Capabilities | None = None,
        limits: StoreLimits | None = None,
    ) -> None:
        """``capabilities``: what the service behind ``endpoint_url`` enforces, where it
        is less than S3 (an emulator); ``limits``: timeouts, retries, the circuit breaker and
        the single-put limit (the settings' defaults when None); ``single_put_limit``: the
        largest body sent as one PutObject, held whole in memory (``limits``' when None)."""
        if not 3 <= len(bucket) <= 63:
            raise ConfigError(f"S3 bucket name {bucket!r} must have 3-63 characters")
        if part_size < 5 * 1024 * 1024:
            raise ConfigError("the S3 part size must be at least 5 MiB")
        self.bucket = bucket
        self.root = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.url = f"s3://{bucket}" + (f"/{self.root.rstrip('/')}" if self.root else "")
        self.endpoint_url = endpoint_url
        self.region = region
        self.path_style = path_style
        self._credentials = (access_key, secret_key)
        self.profile = profile
        self.part_size = part_size
        self.capabilities = capabilities or self.SERVICE
        self.limits = limits or S3Settings()
        self.single_put_limit = single_put_limit or (
            self.limits.single_put_limit if isinstance(self.limits, S3Settings)
            else SINGLE_PUT_LIMIT)
        self.probe_timeout = self.limits.probe_timeout
        self.breaker = Breaker.of(self.url, self.limits)
        self._stack: AsyncExitStack | None = None
        self._s3: Any = None
        self._lock = asyncio.Lock()
        self._digests: dict[str, Digests] = {}  # see _known

    @classmethod
    def from_settings(cls, bucket: str, prefix: str, settings: Settings) -> S3Store:
        return cls(bucket, prefix=prefix, endpoint_url=settings.s3.endpoint_url,
                   region=settings.s3.region, path_style=settings.s3.path_style,
                   profile=settings.s3.profile, limits=settings.s3)

    # -- client ---------------------------------------------------------------------------
    async def _client(self) -> Any:
        if self._s3 is not None:
            return self._s3
        async with self._lock:
            if self._s3 is None:
                from aiobotocore.config import AioConfig
                from aiobotocore.session import AioSession

                session = AioSession(profile=self.profile)
                session.register_component(
                    "data_loader", _data_loader(session.get_config_variable("data_path")))
                access, secret = self._credentials
                config = AioConfig(
                    connect_timeout=self.limits.connect_timeout,
                    read_timeout=self.limits.read_timeout,
                    retries={"total_max_attempts": self.limits.retries + 1, "mode": "standard"},
                    s3={"addressing_style": "path" if self.path_style else "auto"},
                    max_pool_connections=64, signature_version="s3v4",
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required")
                stack = AsyncExitStack()
                self._s3 = await stack.enter_async_context(session.create_client(
                    "s3", endpoint_url=self.endpoint_url,
                    region_name=self.region or session.get_config_variable("region")
                    or "us-east-1",
                    aws_access_key_id=access, aws_secret_access_key=secret, config=config))
                self._stack = stack
        return self._s3

    def _mapped(self, name: str, *, put: bool = False) -> AbstractContextManager[None]:
        """:func:`map_errors` under this store's circuit breaker."""
        return map_errors(name, put=put, breaker=self.breaker)

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack, self._s3 = None, None

    def _key(self, name: str) -> str:
        check_blob_name(name)
        return self.root + name

    async def prepare(self) -> None:
        s3 = await self._client()
        with self._mapped(self.bucket):
            try:
                await s3.head_bucket(Bucket=self.bucket)
                return
            except Exception as exc:
                if _status(exc) != 404:
                    raise
            region = self.region or "us-east-1"
            extra = ({} if region == "us-east-1"
                     else {"CreateBucketConfiguration": {"LocationConstraint": region}})
            with contextlib.suppress(Exception):
                await s3.create_bucket(Bucket=self.bucket, **extra)
            await s3.head_bucket(Bucket=self.bucket)

    async def ping(self) -> None:
        s3 = await self._client()
        try:
            with self._mapped(self.bucket):
                await s3.head_bucket(Bucket=self.bucket)
        except BlobNotFound:  # HEAD has no body: a missing bucket is a bare 404
            raise StoreMissing(f"bucket {self.bucket} does not exist; set "
                               "BLOBLEDGER_STORE_URL to the store in use") from None

    # -- put ------------------------------------------------------------------------------
    async def put(
        self,
        name: str,
        data: AsyncIterable[bytes],
        *,
        tags: Tags,
        content_type: str | None = None,
        expected_sha256: str | None = None,
        expected_md5: str | None = None,
    ) -> Digests:
        key = self._key(name)
        reader = ByteReader(data)
        if await reader.longer_than(self.single_put_limit):
            return await self._multipart(name, key, reader, tags, content_type,
                                         expected_sha256, expected_md5)
        head = await reader.read(self.single_put_limit)
        hasher = Hasher()
        await hasher.update(head)
        digests = hasher.digests()
        verify(digests, expected_sha256, expected_md5)
        await failpoints.hit("put.before_commit")
        s3 = await self._client()
        with self._mapped(name, put=True):
            try:
                await s3.put_object(
                    Bucket=self.bucket, Key=key, Body=head, IfNoneMatch="*",
                    ContentMD5=_md5_header(digests.md5), Tagging=self._tagging(tags, digests),
                    ContentType=content_type or "application/octet-stream")
            except Exception as exc:
                if translate(exc, name, put=True).__class__ is BlobAlreadyExists:
                    raise BlobAlreadyExists(name, digests) from exc
                raise
        await failpoints.hit("put.after_commit")
        return digests

    @staticmethod
    def _tagging(tags: Tags, digests: Digests | None) -> str:
        values = dict(tags)
        if digests is not None:
            values.update(sha256=digests.sha256, md5=digests.md5)
        return urlencode(sorted(values.items()), quote_via=quote)

    async def _multipart(
        self, name: str, key: str, reader: ByteReader, tags: Tags, content_type: str | None,
        expected_sha256: str | None, expected_md5: str | None,
    ) -> Digests:
        s3 = await self._client()
        with self._mapped(name, put=True):
            created = await s3.create_multipart_upload(
                Bucket=self.bucket, Key=key, Tagging=self._tagging(tags, None),
                ContentType=content_type or "application/octet-stream")
        upload_id = created["UploadId"]
        hasher = Hasher()
        etags: dict[int, str] = {}
        in_flight: set[asyncio.Task[None]] = set()
        try:
            number = 0
            while chunk := await reader.read(self.part_size):
                # in order (the whole object's checksums), in a thread, while it is sent
                await hasher.feed(chunk, ahead=PARTS_IN_FLIGHT)
                number += 1
                while len(in_flight) >= PARTS_IN_FLIGHT:
                    done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                    in_flight.difference_update(done)
                    for task in done:
                        task.result()
                in_flight.add(asyncio.ensure_future(
                    self._part(s3, name, key, upload_id, number, chunk, etags)))
            if in_flight:
                await asyncio.gather(*in_flight)
            await hasher.settle()
            parts = [{"ETag": etags[n], "PartNumber": n} for n in sorted(etags)]
            digests = hasher.digests()
            verify(digests, expected_sha256, expected_md5)
            await failpoints.hit("put.before_commit")
            with self._mapped(name, put=True):
                try:
                    await s3.complete_multipart_upload(
                        Bucket=self.bucket, Key=key, UploadId=upload_id, IfNoneMatch="*",
                        MultipartUpload={"Parts": parts})
                except Exception as exc:
                    if translate(exc, name, put=True).__class__ is BlobAlreadyExists:
                        raise BlobAlreadyExists(name, digests) from exc
                    raise
        except BaseException:
            await asyncio.shield(self._abort(key, upload_id, in_flight, hasher))
            raise
        self._known(name, digests)
        await failpoints.hit("put.after_commit")
        return digests

    async def _part(self, s3: Any, name: str, key: str, upload_id: str, number: int,
                    chunk: bytes, etags: dict[int, str]) -> None:
        """One part of a put's multipart upload, its ETag recorded. Its bytes are checked in
        transit once: by their Content-MD5 (computed off the loop) over HTTPS, where the
        signature leaves the payload unsigned when a Content-MD5 is sent; by the signature's
        payload SHA-256 over plain HTTP, where botocore always signs the payload (the MD5
        would hash the part a second time for no further check)."""
        checksum: dict[str, str] = {}
        if self.payload_unsigned:
            digest = await asyncio.to_thread(
                lambda: hashlib.md5(chunk, usedforsecurity=False).digest())
            checksum["ContentMD5"] = base64.b64encode(digest).decode()
        with self._mapped(name):
            uploaded = await s3.upload_part(
                Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                Body=chunk, **checksum)
        etags[number] = uploaded["ETag"]

    @property
    def payload_unsigned(self) -> bool:
        """Whether a request's signature leaves its payload unsigned when it carries a
        Content-MD5: over HTTPS (AWS's endpoints, an ``https://`` endpoint URL), as botocore
        signs S3's bodies. Over plain HTTP it signs every payload's SHA-256."""
        return not (self.endpoint_url or "https:").lower().startswith("http:")

    async def _abort(self, key: str, upload_id: str,
                     in_flight: set[asyncio.Task[None]] | None = None,
                     hasher: Hasher | None = None) -> None:
        """Abort a multipart upload, once the parts still in flight (and the hashing behind
        them) have stopped (none is still sending from this process when the upload is
        dropped)."""
        for task in in_flight or ():
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
        if hasher is not None:
            await hasher.abandon()
        with contextlib.suppress(Exception):
            s3 = await self._client()
            await s3.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)

    # -- staged uploads: a multipart upload, completed with If-None-Match: * ---------------
    async def begin_staged(self, name: str, *, tags: Tags,
                           content_type: str | None = None) -> str:
        """CreateMultipartUpload, tagged ``tags`` (the object has them from its first
        instant); the upload id."""
        s3 = await self._client()
        with self._mapped(name, put=True):
            created = await s3.create_multipart_upload(
                Bucket=self.bucket, Key=self._key(name), Tagging=self._tagging(tags, None),
                ContentType=content_type or "application/octet-stream")
        return str(created["UploadId"])

    async def stage(self, name: str, handle: str, number: int, data: bytes) -> str:
        """UploadPart ``number``; its ETag. Every part but the last must hold at least
        ``capabilities.min_part_size`` bytes (5 MiB), which the caller ensures."""
        s3 = await self._client()
        part_md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        with self._mapped(name):
            uploaded = await s3.upload_part(
                Bucket=self.bucket, Key=self._key(name), UploadId=handle, PartNumber=number,
                Body=data, ContentMD5=part_md5)
        return f"{number}:{uploaded['ETag']}"

    async def commit_staged(
        self, name: str, handle: str, parts: Sequence[str], *, tags: Tags,
        content_type: str | None = None,
    ) -> Digests:
        """CompleteMultipartUpload with If-None-Match: * (the object carries the tags given
        at the start), then the checksums of the bytes read back as tags (S3 cannot hash a
        multipart object for us). With no part (an empty file: S3 refuses to complete a
        multipart upload without one), the multipart upload is aborted and the empty object
        created by the create-only single put instead, with the same tags."""
        await failpoints.hit("staged.before_commit")
        if not parts:
            await self._abort(self._key(name), handle)
            return await self.put(name, _empty(), tags=tags, content_type=content_type)
        s3 = await self._client()
        listed = []
        for part in parts:
            number, etag = part.split(":", 1)
            listed.append({"PartNumber": int(number), "ETag": etag})
        with self._mapped(name, put=True):
            await s3.complete_multipart_upload(
                Bucket=self.bucket, Key=self._key(name), UploadId=handle, IfNoneMatch="*",
                MultipartUpload={"Parts": listed})
        await failpoints.hit("staged.after_commit")
        return await self.digest_stored(name)

    async def direct_put(self, name: str, *, size: int, tags: Tags, content_type: str,
                         expires_in: float) -> DirectPut | None:
        """A presigned PutObject of this one key whose signature covers ``If-None-Match: *``,
        the tags (``x-amz-tagging``) and ``Content-Length: size``: S3 refuses the request
        without them or with another length, and refuses it with them if the key exists.
        (moto checks no presigned signature: there, completion refuses a wrong size.)"""
        s3 = await self._client()
        tagging = self._tagging(tags, None)
        url = await s3.generate_presigned_url("put_object", Params={
            "Bucket": self.bucket, "Key": self._key(name), "IfNoneMatch": "*",
            "Tagging": tagging, "ContentType": content_type, "ContentLength": size},
            ExpiresIn=int(expires_in))
        return DirectPut(url=str(url), expires_at=datetime.now(UTC)
                         + timedelta(seconds=int(expires_in)), headers={
            "If-None-Match": "*", "x-amz-tagging": tagging, "Content-Type": content_type,
            "Content-Length": str(size)})

    async def read_url(self, name: str, *, expires_in: float, filename: str,
                       content_type: str) -> SignedRead | None:
        """A presigned GetObject of this one key, its answer's Content-Disposition and
        Content-Type fixed by the signature (``response-content-disposition``,
        ``response-content-type``)."""
        s3 = await self._client()
        url = await s3.generate_presigned_url("get_object", Params={
            "Bucket": self.bucket, "Key": self._key(name),
            "ResponseContentDisposition": content_disposition(filename, content_type),
            "ResponseContentType": content_type,
            "ResponseCacheControl": signed_cache_control(expires_in)},
            ExpiresIn=int(expires_in))
        return SignedRead(url=str(url), expires_at=datetime.now(UTC)
                          + timedelta(seconds=int(expires_in)))

    async def abort_staged(self, name: str, handle: str) -> None:
        await self._abort(self._key(name), handle)

    async def digest_stored(self, name: str) -> Digests:
        """The stored bytes' size and checksums, hashed from the bytes themselves (checksum
        tags are not trusted here: a direct upload's client could have chosen them). Writes
        nothing."""
        digests = await self._hash(name)
        self._known(name, digests)
        return digests

    def _known(self, name: str, digests: Digests) -> None:
        """Remember the checksums of bytes this process stored or hashed (a name's bytes
        never change), for the retag that writes them as tags."""
        self._digests[name] = digests
        while len(self._digests) > KNOWN_DIGESTS:
            self._digests.pop(next(iter(self._digests)))

    # -- metadata -------------------------------------------------------------------------
    async def stat(self, name: str) -> BlobInfo:
        """Size, ETag, tags and checksums; a blob whose checksum tags are not written yet
        (a multipart or direct upload before its retag) is hashed, never retagged: only
        :meth:`set_tags` writes tags."""
        s3 = await self._client()
        with self._mapped(name):
            head = await s3.head_object(Bucket=self.bucket, Key=self._key(name))
        tags = await self._all_tags(name)
        if not all(k in tags for k in CHECKSUM_TAGS):
            digests = self._digests.get(name) or await self._hash(name)
            self._known(name, digests)
            tags = {**tags, "sha256": digests.sha256, "md5": digests.md5}
        return BlobInfo(name=name, size=int(head["ContentLength"]),
                        last_modified=head["LastModified"], etag=str(head["ETag"]),
                        content_type=head.get("ContentType"), sha256=tags.get("sha256"),
                        md5=tags.get("md5"), tags=_visible(tags))

    async def _hash(self, name: str) -> Digests:
        """The checksums of the stored bytes, read back."""
        hasher = Hasher()
        reader = await self.open(name)
        try:
            async for chunk in reader:
                await hasher.update(chunk)
        finally:
            await reader.aclose()
        return hasher.digests()

    async def get_tags(self, name: str) -> dict[str, str]:
        return _visible(await self._all_tags(name))

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        """Compare the current tags, then replace them, with the checksum tags: the
        comparison is this client's, not the service's (S3 has no conditional tagging).

        This is the only tag write after an object's creation, and it writes the state its
        caller decided under the database fence, never a set read before another actor's
        retag: a multipart or direct upload's checksums, which S3 cannot compute for a whole
        object, are written here with the state (known from this process's upload or hash,
        or hashed now), never in a write of their own."""
        current = await self._all_tags(name)
        if not tags_match(_visible(current), if_tags):
            raise ConditionNotMet(name, f"tags are {_visible(current)}")
        kept = {k: v for k, v in current.items() if k in CHECKSUM_TAGS}
        if len(kept) < len(CHECKSUM_TAGS):
            digests = self._digests.get(name) or await self._hash(name)
            kept = {"sha256": digests.sha256, "md5": digests.md5}
        await failpoints.hit("store.set_tags.after_read")
        s3 = await self._client()
        with self._mapped(name):
            await s3.put_object_tagging(Bucket=self.bucket, Key=self._key(name),
                                        Tagging=_tag_set({**kept, **tags}))

    async def _delete(self, name: str, condition: Condition) -> bool:
        """Delete under ``If-Match`` on an ETag: the given one, or, for a tag condition, the
        one seen when the tags were compared. The service refuses to delete other bytes than
        those checked; the tag comparison itself rests on the database fence."""
        s3 = await self._client()
        key = self._key(name)
        etag = condition.etag
        if condition.tags is not None:
            try:
                with self._mapped(name):
                    head = await s3.head_object(Bucket=self.bucket, Key=key)
                tags = _visible(await self._all_tags(name))
            except BlobNotFound:
                return False
            if not tags_match(tags, condition.tags):
                raise ConditionNotMet(name, f"tags are {tags}")
            etag = str(head["ETag"])
            await failpoints.hit("delete.after_check")
        try:
            with self._mapped(name):
                await s3.delete_object(Bucket=self.bucket, Key=key, IfMatch=etag)
        except BlobNotFound:
            return False
        return True

    async def _delete_many(
        self, items: Sequence[tuple[str, Condition]]
    ) -> list[DeleteOutcome]:
        """Each delete on its own (conditioned as :meth:`_delete`), ``CONCURRENCY`` at once:
        S3's DeleteObjects carries no per-object condition."""
        semaphore = asyncio.Semaphore(CONCURRENCY)

        async def one(name: str, condition: Condition) -> DeleteOutcome:
            async with semaphore:
                try:
                    return DeleteOutcome(name, deleted=await self._delete(name, condition))
                except StoreUnavailable:
                    raise
                except StoreError as exc:
                    return DeleteOutcome(name, error=exc)

        return list(await asyncio.gather(*(one(n, c) for n, c in items)))
