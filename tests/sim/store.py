"""An in-memory store with the local disk's semantics, for the simulation.

Create-only puts (published atomically when the last byte is hashed), tags with equality
conditions, deletes conditioned on tags or the ETag, lexical listing, staged uploads whose
parts are uncommitted bytes. Every call is an ``await`` (``point``: the simulation's
preemption, pause and crash point, named ``store.<call>``), and a write may be followed by an
injected fault (``after_write``): the write applied, the caller told it failed (an error or a
timeout whose answer was lost). ``tests/sim/test_store.py`` runs the store conformance suite
on it, so the simulation's store cannot drift from what the real backends guarantee.

Conditional calls are the local disk's (``stores/local.py``): the condition read and the act
(the retag's write, the delete's unlink) are two steps with a preemption point between them
(``store.set_tags.after_read``, ``delete.after_check``, the real store's failpoints there),
taken under the blob's lock as the disk's ``flock`` is; ``flock=False`` leaves the lock out
(the historical bug, ``store:stores/local:_locked:without-flock``), so an un-fenced call can
lose the race. :class:`AzureMemoryStore` is Azure's semantics where they differ: a staged
upload's blocks stay with the blob once committed (a second Put Block List of the same ids
is answered by the service), and the commit is create-only (``If-None-Match: *``) unless
``create_only_commit=False`` (the historical bug, which re-creates a committed blob
``pending``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from blobledger._base.names import check_blob_name
from blobledger.errors import BlobAlreadyExists, BlobNotFound, ConditionNotMet, Digests
from blobledger.protocol.models import STATE_TAG
from blobledger.stores.base import (
    BlobInfo,
    BlobReader,
    ByteReader,
    Condition,
    Hasher,
    Store,
    Tags,
    UncommittedInfo,
    tags_match,
    verify,
)

READ_CHUNK = 64 * 1024

Hook = Callable[[str], Awaitable[None]]


async def _nothing(point: str) -> None:
    return None


@dataclass
class Blob:
    data: bytes
    tags: dict[str, str]
    etag: str
    modified: datetime
    content_type: str | None
    digests: Digests


#: state tag moves that go backwards (tags go pending -> committed -> deleting only)
_BACKWARDS = frozenset({("deleting", "committed"), ("deleting", "pending"),
                        ("committed", "pending")})


@dataclass
class MemoryStore(Store):
    """Blobs in a dict; ``clock`` gives the time stamped on them (the simulation's)."""

    clock: Callable[[], datetime] = lambda: datetime.now(UTC).replace(tzinfo=None)
    #: awaited at the start of every call (a preemption point)
    point: Hook = _nothing
    #: awaited after every write that applied (may raise: the caller is told it failed)
    after_write: Hook = _nothing
    blobs: dict[str, Blob] = field(default_factory=dict)
    parts: dict[str, dict[str, bytes]] = field(default_factory=dict)
    url: str = "memory://sim"
    #: a mutant of the simulation: the store's own tag checks skipped (``set_tags``' and the
    #: delete's ``if_tags``), as the mutation kind ``store`` does to the real backends
    ignore_tag_conditions: bool = False
    #: the blob's lock around a conditional call's read and act (False: the local store's
    #: ``_locked`` without its ``flock``)
    flock: bool = True
    #: a mutant of the simulation: a staged upload's publication discards its parts on any
    #: outcome (the local store's bug: a refused publication, a full disk, left a tus upload
    #: that no retried completion could publish), not only once published
    publish_discards_parts: bool = False
    #: state tags written backwards (``deleting`` to anything else, ``committed`` to
    #: ``pending``): tags only go forward, and a conditioned delete relies on it
    backwards: list[str] = field(default_factory=list)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    atomic_conditions = False
    _etags: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _parts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _blob(self, name: str) -> Blob:
        check_blob_name(name)
        blob = self.blobs.get(name)
        if blob is None:
            raise BlobNotFound(name)
        return blob

    def _info(self, name: str, blob: Blob) -> BlobInfo:
        return BlobInfo(name=name, size=len(blob.data), last_modified=blob.modified,
                        etag=blob.etag, content_type=blob.content_type,
                        sha256=blob.digests.sha256, md5=blob.digests.md5,
                        tags=dict(blob.tags))

    async def put(self, name: str, data: AsyncIterable[bytes], *, tags: Tags,
                  content_type: str | None = None, expected_sha256: str | None = None,
                  expected_md5: str | None = None) -> Digests:
        check_blob_name(name)
        await self.point("store.put")
        hasher = Hasher()
        chunks = []
        reader = ByteReader(data)
        while chunk := await reader.read(READ_CHUNK):
            hasher.update_sync(chunk)
            chunks.append(bytes(chunk))
        digests = hasher.digests()
        verify(digests, expected_sha256, expected_md5)
        if name in self.blobs:
            raise BlobAlreadyExists(name, digests)
        self.blobs[name] = Blob(b"".join(chunks), dict(tags), f'"{next(self._etags)}"',
                                self.clock(), content_type, digests)
        await self.after_write("store.put")
        return digests

    async def stat(self, name: str) -> BlobInfo:
        check_blob_name(name)
        await self.point("store.stat")
        return self._info(name, self._blob(name))

    async def get_tags(self, name: str) -> dict[str, str]:
        check_blob_name(name)
        await self.point("store.get_tags")
        return dict(self._blob(name).tags)

    @contextlib.asynccontextmanager
    async def _locked(self, name: str) -> AsyncIterator[Blob]:
        """The blob, held under its lock (the disk's ``flock``) while the caller reads its
        condition and acts; BlobNotFound if there is none."""
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock if self.flock else contextlib.nullcontext():
            yield self._blob(name)

    async def _between(self, point: str) -> None:
        """Between a conditional call's read and its act: a preemption point on the disk,
        none where the service checks and acts at once (Azure's ``x-ms-if-tags``)."""
        if not self.atomic_conditions:
            await self.point(point)

    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        check_blob_name(name)
        await self.point("store.set_tags")
        async with self._locked(name) as blob:
            if not self.ignore_tag_conditions and not tags_match(blob.tags, if_tags):
                raise ConditionNotMet(name, f"tags {dict(if_tags or {})}")
            await self._between("store.set_tags.after_read")
            before, after = blob.tags.get(STATE_TAG), tags.get(STATE_TAG)
            if (before, after) in _BACKWARDS and self.blobs.get(name) is blob:
                self.backwards.append(f"{name}: {before} -> {after}")
            blob.tags = dict(tags)  # on the blob read (an unlinked file's descriptor)
        await self.after_write("store.set_tags")

    async def _delete(self, name: str, condition: Condition) -> bool:
        check_blob_name(name)
        await self.point("store.delete")
        try:
            async with self._locked(name) as blob:
                if condition.tags:
                    holds = self.ignore_tag_conditions or tags_match(blob.tags, condition.tags)
                else:
                    holds = blob.etag.strip('"') == (condition.etag or "").strip('"')
                if not holds:
                    raise ConditionNotMet(name, f"tags {condition.tags} etag {condition.etag}")
                await self._between("delete.after_check")
                if self.blobs.get(name) is blob:  # unlink: the name (write-once) still links it
                    del self.blobs[name]
        except BlobNotFound:
            return False
        await self.after_write("store.delete")
        return True

    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        check_blob_name(name)
        await self.point("store.open")
        blob = self._blob(name)
        info = self._info(name, blob)
        start = max(0, min(start, info.size))
        available = info.size - start
        length = available if length is None else max(0, min(length, available))
        return BlobReader(info, start, length, self._chunks(blob.data[start:start + length]))

    @staticmethod
    async def _chunks(data: bytes) -> AsyncIterator[bytes]:
        for offset in range(0, len(data), READ_CHUNK):
            yield data[offset:offset + READ_CHUNK]

    async def list(self, prefix: str = "", *, tags: bool = True,
                   checksums: bool = True) -> AsyncIterator[BlobInfo]:
        await self.point("store.list")
        for name in sorted(n for n in self.blobs if n.startswith(prefix)):
            blob = self.blobs.get(name)
            if blob is not None:  # deleted while the listing streamed
                yield self._info(name, blob)

    async def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        await self.point("store.list_uncommitted")
        for name in sorted(n for n in self.parts if n.startswith(prefix)):
            parts = self.parts.get(name)
            if parts:
                yield UncommittedInfo(name=name, blocks=len(parts),
                                      size=sum(len(p) for p in parts.values()),
                                      committed=name in self.blobs,
                                      last_modified=self.clock())

    async def discard_uncommitted(self, name: str) -> bool:
        check_blob_name(name)
        await self.point("store.discard_uncommitted")
        return bool(self.parts.pop(name, None))

    async def begin_staged(self, name: str, *, tags: Tags,
                           content_type: str | None = None) -> str:
        check_blob_name(name)
        return ""

    async def stage(self, name: str, handle: str, number: int, data: bytes) -> str:
        check_blob_name(name)
        await self.point("store.stage")
        part = f"{number:06d}-{next(self._parts)}"
        self.parts.setdefault(name, {})[part] = bytes(data)
        return part

    async def commit_staged(self, name: str, handle: str, parts: Sequence[str], *,
                            tags: Tags, content_type: str | None = None) -> Digests:
        check_blob_name(name)
        held = self.parts.get(name, {})
        if any(part not in held for part in parts):
            raise BlobNotFound(f"{name} (a part is missing)")
        data = [held[part] for part in parts]

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in data:
                yield chunk

        # as the local store's: the parts go once published (or found published already);
        # a publication that failed keeps them for a retried completion
        try:
            digests = await self.put(name, chunks(), tags=tags, content_type=content_type)
        except BlobAlreadyExists:
            self.parts.pop(name, None)
            raise
        except BaseException:
            if self.publish_discards_parts:
                self.parts.pop(name, None)
            raise
        self.parts.pop(name, None)
        return digests

    async def abort_staged(self, name: str, handle: str) -> None:
        await self.discard_uncommitted(name)

    async def ping(self) -> None:
        return None


@dataclass
class AzureMemoryStore(MemoryStore):
    """Azure's staged uploads: committed blocks stay referable by a later Put Block List of
    the same ids, which is create-only (``If-None-Match: *``) unless ``create_only_commit``
    is off: then it re-creates the blob with the commit's tags (``pending``) and bytes."""

    url: str = "azure://sim"
    atomic_conditions = True
    create_only_commit: bool = True
    committed_blocks: dict[str, dict[str, bytes]] = field(default_factory=dict)

    async def commit_staged(self, name: str, handle: str, parts: Sequence[str], *,
                            tags: Tags, content_type: str | None = None) -> Digests:
        check_blob_name(name)
        await self.point("staged.before_commit")
        blocks = {**self.committed_blocks.get(name, {}), **self.parts.get(name, {})}
        if any(part not in blocks for part in parts):
            raise BlobNotFound(f"{name} (a block is missing)")
        if name in self.blobs and self.create_only_commit:
            raise BlobAlreadyExists(name)
        data = b"".join(blocks[part] for part in parts)
        hasher = Hasher()
        hasher.update_sync(data)
        self.blobs[name] = Blob(data, dict(tags), f'"{next(self._etags)}"', self.clock(),
                                content_type, hasher.digests())
        self.committed_blocks[name] = {part: blocks[part] for part in parts}
        self.parts.pop(name, None)  # uncommitted blocks go with a commit
        await self.after_write("store.commit_staged")
        return await self.digest_stored(name)

    async def _delete(self, name: str, condition: Condition) -> bool:
        deleted = await super()._delete(name, condition)
        if deleted:
            self.committed_blocks.pop(name, None)  # a blob's blocks go with it
        return deleted
