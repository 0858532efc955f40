"""The store contract: what every backend must do, one line of contract per method.

A store keeps write-once blobs under server-generated names, each with a small set of
index tags (``state`` is the one the protocol uses) and the checksums computed on upload.
Every method checks the blob name with :func:`blobledger._base.names.check_blob_name` first.

Errors (from :mod:`blobledger.errors`): ``BlobAlreadyExists``, ``BlobNotFound``,
``ConditionNotMet``, ``IntegrityError``, ``StoreUnavailable``. Nothing else escapes a store.

No unconditional delete exists: :meth:`Store.delete` and :meth:`Store.delete_many` take a
:class:`Condition` that the store itself enforces (the blob's tags, or its ETag), and refuse
with ``ValueError`` to run without one. Backends implement :meth:`Store._delete`, which only
ever receives a valid condition.
"""

from __future__ import annotations

import abc
import asyncio
import hashlib
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import overload

from blobledger.errors import (
    ConditionNotMet,
    Digests,
    IntegrityError,
    StoreError,
    StoreUnavailable,
)
from blobledger.stores.limits import StoreLimits
from blobledger.stores.resilience import Breaker

Tags = Mapping[str, str]
HASH_IN_THREAD_ABOVE = 256 * 1024


@dataclass(frozen=True)
class BlobInfo:
    """What a store knows about one committed blob."""

    name: str
    size: int
    last_modified: datetime
    etag: str
    content_type: str | None = None
    sha256: str | None = None
    md5: str | None = None
    tags: Mapping[str, str] | None = None


@dataclass(frozen=True)
class UncommittedInfo:
    """Bytes uploaded under a name but never committed (a losing or abandoned staged put)."""

    name: str
    blocks: int
    size: int
    committed: bool  # whether a committed blob of the same name also exists
    last_modified: datetime | None = None


@dataclass(frozen=True)
class Condition:
    """What must hold, checked by the store itself, for a delete to go through: the blob's
    tags include ``tags`` (equality), or its ETag is ``etag``. Exactly one of the two.

    One at a time because a store may honour only one of them in a single request (Azurite
    3.37 evaluates ``If-Match`` and then ignores ``x-ms-if-tags``).
    """

    tags: Tags | None = None
    etag: str | None = None

    def __post_init__(self) -> None:
        if self.tags is not None and not isinstance(self.tags, Mapping):
            raise TypeError(f"a tag condition is a mapping, not {type(self.tags).__name__}")
        if bool(self.tags) == bool(self.etag):
            raise ValueError(
                "a delete needs exactly one storage-side condition: if_tags (non-empty) "
                "or if_etag; an unconditional delete is never sent"
            )


@dataclass(frozen=True)
class DeleteOutcome:
    """The result of one delete in :meth:`Store.delete_many`."""

    name: str
    deleted: bool = False  # True: removed now; False with no error: was already absent
    error: StoreError | None = None


@dataclass
class BlobReader:
    """An open, ranged read: ``info`` is known before the first byte is sent."""

    info: BlobInfo
    start: int
    length: int
    chunks: AsyncIterator[bytes] = field(repr=False)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.chunks

    async def aclose(self) -> None:
        closer = getattr(self.chunks, "aclose", None)
        if closer is not None:
            await closer()


class Hasher:
    """Size, MD5 and SHA-256 over a stream; large chunks are hashed off the event loop.

    A chunk's two digests are computed in one thread, one after the other (the chunk is
    then read from the cache by the second): hashing costs one core at most, never two
    that the storage's own work may need. :meth:`update` hashes a chunk before it returns;
    :meth:`feed` hashes it behind the caller (the bytes can be on their way meanwhile),
    in order, until :meth:`settle`.
    """

    def __init__(self) -> None:
        self._md5 = hashlib.md5(usedforsecurity=False)
        self._sha = hashlib.sha256()
        self.size = 0
        #: chunks fed and not yet hashed (None ends the worker), and the worker hashing them
        self._queue: asyncio.Queue[bytes | memoryview | None] | None = None
        self._worker: asyncio.Task[None] | None = None

    def update_sync(self, chunk: bytes | memoryview) -> None:
        self._md5.update(chunk)
        self._sha.update(chunk)
        self.size += len(chunk)

    async def update(self, chunk: bytes | memoryview) -> None:
        """Hash a chunk (after every chunk fed before it); a large one off the loop."""
        await self.settle()
        await self._hash(chunk)

    async def _hash(self, chunk: bytes | memoryview) -> None:
        if len(chunk) < HASH_IN_THREAD_ABOVE:
            self.update_sync(chunk)
        else:
            await asyncio.to_thread(self.update_sync, chunk)

    async def feed(self, chunk: bytes | memoryview, *, ahead: int = 4) -> None:
        """Hash a chunk behind the caller, in order with the chunks fed before it: this
        returns once the chunk is queued, after waiting while ``ahead`` chunks fed before it
        are still queued (what the hashing's lag may hold in memory). The chunk must not
        change until it is hashed (``bytes``, or a view of ``bytes``). :meth:`settle` waits
        until every chunk fed is hashed; :meth:`abandon` drops them."""
        if self._worker is None:
            self._queue = asyncio.Queue(maxsize=max(ahead, 1))
            self._worker = asyncio.ensure_future(self._work(self._queue))
        assert self._queue is not None
        await self._queue.put(chunk)

    async def _work(self, queue: asyncio.Queue[bytes | memoryview | None]) -> None:
        """Hash what is fed until None; after a failure, take the rest unhashed (no feed
        waits forever on a full queue) and raise it at the end, to :meth:`settle`."""
        failure: Exception | None = None
        while (chunk := await queue.get()) is not None:
            if failure is None:
                try:
                    await self._hash(chunk)
                except Exception as exc:  # raised to settle()
                    failure = exc
        if failure is not None:
            raise failure

    async def settle(self) -> None:
        """Wait until every chunk fed is hashed."""
        worker, queue = self._worker, self._queue
        if worker is None or queue is None:
            return
        await queue.put(None)
        self._worker = self._queue = None
        await worker

    async def abandon(self) -> None:
        """Drop the chunks fed and not yet hashed (the hasher is then of no further use)."""
        worker, self._worker, self._queue = self._worker, None, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)

    def digests(self) -> Digests:
        if self._worker is not None:
            raise RuntimeError("chunks fed to the hasher are not settled")
        return Digests(size=self.size, md5=self._md5.hexdigest(), sha256=self._sha.hexdigest())


def verify(digests: Digests, expected_sha256: str | None, expected_md5: str | None) -> None:
    """Raise IntegrityError if an expected checksum was given and does not match."""
    if expected_sha256 is not None and expected_sha256.lower() != digests.sha256:
        raise IntegrityError(
            f"SHA-256 mismatch: expected {expected_sha256.lower()}, received {digests.sha256}"
        )
    if expected_md5 is not None and expected_md5.lower() != digests.md5:
        raise IntegrityError(
            f"MD5 mismatch: expected {expected_md5.lower()}, received {digests.md5}"
        )


class ByteReader:
    """Reads exact-size blocks from a byte stream, copying each byte once at most: a block
    that is the whole of one ``bytes`` the stream yielded (a body given in memory, read up
    to a single put's limit) is that object itself, not a copy of it; :meth:`read_view`
    copies none that lies within one ``bytes``."""

    def __init__(self, source: AsyncIterable[bytes]) -> None:
        self._source = aiter(source)
        self._pending: deque[memoryview] = deque()
        self._eof = False

    def unread(self, data: bytes | memoryview) -> None:
        """Put bytes back in front of the stream."""
        if data:
            self._pending.appendleft(memoryview(data))

    async def longer_than(self, size: int) -> bool:
        """Whether more than ``size`` bytes are left, reading ahead as far as that takes
        and consuming nothing."""
        buffered = sum(len(view) for view in self._pending)
        while buffered <= size and not self._eof:
            buffered += await self._pull()
        return buffered > size

    async def _pull(self) -> int:
        """The source's next piece put behind what is pending: its length (0 for an empty
        piece, or at the end of the stream, which is then noted)."""
        try:
            piece = await anext(self._source)
        except StopAsyncIteration:
            self._eof = True
            return 0
        if piece:
            self._pending.append(memoryview(piece))
        return len(piece)

    async def read(self, size: int) -> bytes:
        """Up to ``size`` bytes; fewer only at the end of the stream, b"" after it."""
        block = await self.read_view(size)
        return block if isinstance(block, bytes) else bytes(block)

    async def read_view(self, size: int) -> bytes | memoryview:
        """As :meth:`read`, but a block that lies within one ``bytes`` the stream yielded is a
        read-only view of it, not a copy (for a consumer that takes any buffer and keeps
        none: the block's bytes never change)."""
        parts = await self._take(size)
        if len(parts) == 1 and isinstance(whole := parts[0].obj, bytes):
            return whole if len(parts[0]) == len(whole) else parts[0]
        return b"".join(parts)

    async def _take(self, size: int) -> list[memoryview]:
        parts: list[memoryview] = []
        need = size
        while need > 0:
            if not self._pending:
                if self._eof:
                    break
                await self._pull()
                continue
            view = self._pending[0]
            if len(view) <= need:
                parts.append(view)
                self._pending.popleft()
                need -= len(view)
            else:
                parts.append(view[:need])
                self._pending[0] = view[need:]
                need = 0
        return parts


def tags_match(tags: Mapping[str, str] | None, condition: Tags | None) -> bool:
    """Whether ``tags`` satisfy an equality condition (every key equals its value)."""
    if not condition:
        return True
    tags = tags or {}
    return all(tags.get(key) == value for key, value in condition.items())


@dataclass(frozen=True)
class DirectPut:
    """How a client creates one blob itself, without the bytes passing through blobledger:
    one ``method`` request to ``url`` carrying ``headers``, valid until ``expires_at``. The
    service behind the URL creates the blob only if its name is free (never overwrites)."""

    url: str
    headers: Mapping[str, str]
    expires_at: datetime
    method: str = "PUT"


@dataclass(frozen=True)
class SignedRead:
    """A short-lived URL that reads one blob, whole or by ``Range``, with no credential of
    its holder's, until ``expires_at`` (the storage's clock); it opens that blob alone and
    writes nothing."""

    url: str
    expires_at: datetime


@dataclass(frozen=True)
class Capabilities:
    """What the storage service itself enforces, as opposed to what the store checks before
    it asks. An emulator's gap is a capability it lacks; the conformance suite asserts each
    one either way, never skips it.

    ``create_only``: a put on a taken name is refused, atomically (one winner in a race).
    ``state_conditioned_delete``: a delete whose ``state`` tag differs is refused.
    ``state_conditioned_transition``: a retag whose current ``state`` differs is refused
    (without it the store compares first: a visible mismatch is still refused, a change that
    races the comparison is not; the protocol then rests on the database fence).
    ``etag_conditioned_delete``: a delete whose ETag changed is refused.
    ``batch_delete``: one request deletes many blobs, each under its own condition.
    ``min_part_size``: the smallest part a staged upload accepts, but for its last one
    (S3: 5 MiB; 1 where any size is accepted).
    """

    create_only: bool = True
    state_conditioned_delete: bool = True
    state_conditioned_transition: bool = True
    etag_conditioned_delete: bool = True
    batch_delete: bool = False
    min_part_size: int = 1


class Store(abc.ABC):
    """A write-once blob store with state-guarded mutations."""

    url: str
    capabilities: Capabilities = Capabilities()
    #: how long :meth:`probe` waits for the store
    probe_timeout: float = StoreLimits().probe_timeout
    #: the circuit breaker of a remote store (:mod:`blobledger.stores.resilience`)
    breaker: Breaker | None = None

    @abc.abstractmethod
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
        """Create-only upload, hashing while streaming; publish atomically or not at all.

        If the name exists, raise BlobAlreadyExists (carrying the computed digests): never
        overwrite. If an expected checksum is given and differs, raise IntegrityError and
        leave nothing behind. The SHA-256 is stored with the blob (see :meth:`stat`).
        """

    @abc.abstractmethod
    async def stat(self, name: str) -> BlobInfo:
        """Size, checksums, content type, tags and timestamps; BlobNotFound if absent."""

    @abc.abstractmethod
    async def get_tags(self, name: str) -> dict[str, str]:
        """The blob's tags; BlobNotFound if absent."""

    @abc.abstractmethod
    async def set_tags(self, name: str, tags: Tags, *, if_tags: Tags | None = None) -> None:
        """Replace the tags, only if the current tags satisfy ``if_tags`` (ConditionNotMet);
        see ``capabilities.state_conditioned_transition`` for who enforces it."""

    @overload
    async def delete(self, name: str, *, if_tags: Tags) -> bool: ...

    @overload
    async def delete(self, name: str, *, if_etag: str) -> bool: ...

    async def delete(
        self, name: str, *, if_tags: Tags | None = None, if_etag: str | None = None
    ) -> bool:
        """Delete if the store confirms the condition; True if deleted, False if absent.

        Exactly one condition: ``if_tags`` (the blob's tags include these) or ``if_etag``
        (the blob still has this ETag). A blob that does not match is refused with
        ConditionNotMet and survives. Without a condition: ValueError, nothing is sent.
        """
        return await self._delete(name, Condition(tags=if_tags, etag=if_etag))

    @abc.abstractmethod
    async def _delete(self, name: str, condition: Condition) -> bool:
        """The backend's conditional delete; the condition is always a valid one."""

    async def delete_many(self, items: Sequence[tuple[str, Tags]]) -> list[DeleteOutcome]:
        """Delete several blobs, each under its own tag condition; one outcome per item.

        Every item needs a non-empty condition: one without refuses the whole call
        (ValueError) before anything is deleted.
        """
        conditions = [(name, Condition(tags=tags)) for name, tags in items]
        return await self._delete_many(conditions)

    async def _delete_many(
        self, items: Sequence[tuple[str, Condition]]
    ) -> list[DeleteOutcome]:
        """One by one unless the backend batches; every condition is a valid one."""
        outcomes = []
        for name, condition in items:
            try:
                deleted = await self._delete(name, condition)
                outcomes.append(DeleteOutcome(name, deleted=deleted))
            except ConditionNotMet as exc:
                outcomes.append(DeleteOutcome(name, error=exc))
        return outcomes

    @abc.abstractmethod
    async def open(self, name: str, start: int = 0, length: int | None = None) -> BlobReader:
        """A ranged streaming read of ``length`` bytes from ``start`` (to the end if None)."""

    @abc.abstractmethod
    def list(
        self, prefix: str = "", *, tags: bool = True, checksums: bool = True
    ) -> AsyncIterator[BlobInfo]:
        """Committed blobs under ``prefix`` in lexical (code point) order, streamed; without
        ``tags`` or ``checksums`` those fields may be None (cheaper where they cost)."""

    @abc.abstractmethod
    def list_uncommitted(self, prefix: str = "") -> AsyncIterator[UncommittedInfo]:
        """Names holding uncommitted bytes (empty where the backend never leaves any)."""

    @abc.abstractmethod
    async def discard_uncommitted(self, name: str) -> bool:
        """Remove uncommitted bytes left under ``name``; True if some were removed.

        A committed blob is never touched, not even one committed while this runs (the
        store enforces it, not a prior check)."""

    # -- staged uploads (resumable uploads: parts sent in separate requests) ----------------
    async def begin_staged(self, name: str, *, tags: Tags,
                           content_type: str | None = None) -> str:
        """Start a staged upload for ``name`` that will be tagged ``tags``; its handle (an S3
        upload id; "" where the store needs none). Nothing becomes visible under the name."""
        raise StoreError(f"{type(self).__name__} has no staged uploads")

    async def stage(self, name: str, handle: str, number: int, data: bytes) -> str:
        """Store part ``number`` (from 1) as uncommitted bytes; the part's id for
        :meth:`commit_staged`. Calling it again for a number stores a new part with a new id
        and never changes the bytes of an id already returned."""
        raise StoreError(f"{type(self).__name__} has no staged uploads")

    async def commit_staged(
        self, name: str, handle: str, parts: Sequence[str], *, tags: Tags,
        content_type: str | None = None,
    ) -> Digests:
        """Create-only publication of ``parts`` in order under ``name`` (BlobAlreadyExists if
        the name is taken: never overwrite), tagged ``tags``; the digests of what the store
        then holds (read back where the service cannot hash it), stored with the blob."""
        raise StoreError(f"{type(self).__name__} has no staged uploads")

    async def abort_staged(self, name: str, handle: str) -> None:
        """Drop the uncommitted parts of a staged upload; never touches a committed blob."""
        raise StoreError(f"{type(self).__name__} has no staged uploads")

    # -- direct uploads -------------------------------------------------------------------
    async def direct_put(self, name: str, *, size: int, tags: Tags, content_type: str,
                         expires_in: float) -> DirectPut | None:
        """A short-lived URL through which a client can create exactly ``name`` (and no other
        blob) of exactly ``size`` bytes where the URL can bind the size (S3: a signed
        ``Content-Length``; an Azure SAS cannot: completion refuses any other size, and the
        sweeper removes the blob), tagged ``tags`` where the URL can bind them to that one
        request (a store whose credential could tag at creation only by tagging at will,
        Azure's SAS, creates the blob untagged and counts that as ``pending``), never
        overwriting; None where the store has none (the service then receives the bytes
        itself, and refuses any byte past ``size``)."""
        return None

    # -- signed reads ---------------------------------------------------------------------
    async def read_url(self, name: str, *, expires_in: float, filename: str,
                       content_type: str) -> SignedRead | None:
        """A short-lived URL that reads exactly ``name`` (no other blob, no write) for
        ``expires_in`` seconds, answering with ``content_type`` and the Content-Disposition
        of ``filename`` (:func:`blobledger._base.disposition.content_disposition`) and a
        Cache-Control that keeps the answer no longer than the URL lives
        (:func:`~blobledger._base.disposition.signed_cache_control`); None where the store
        has none (local disk: the service signs its own URL)."""
        return None

    async def digest_stored(self, name: str) -> Digests:
        """Hash the bytes the store holds under ``name`` and record the checksums with the
        blob (for a staged upload whose commit succeeded but whose checksums were not
        recorded: a crash in between, or a retried completion)."""
        hasher = Hasher()
        reader = await self.open(name)
        try:
            async for chunk in reader:
                await hasher.update(chunk)
        finally:
            await reader.aclose()
        digests = hasher.digests()
        await self._record_digests(name, digests)
        return digests

    async def _record_digests(self, name: str, digests: Digests) -> None:  # noqa: B027
        """Store checksums computed after the blob was published (where the backend can)."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailable (or ConfigError) unless the store answers."""

    async def probe(self) -> None:
        """:meth:`ping` within :attr:`probe_timeout` (``/readyz``, the workers' start-up
        check): StoreUnavailable when the store does not answer in time. A probe that times
        out counts as an unreachable answer for the :attr:`breaker`."""
        try:
            async with asyncio.timeout(self.probe_timeout):
                await self.ping()
        except TimeoutError:
            if self.breaker is not None:
                self.breaker.unreachable()
            raise StoreUnavailable(f"store {self.url} unreachable: no answer within "
                                   f"{self.probe_timeout:g}s") from None

    async def prepare(self) -> None:  # noqa: B027 - optional hook
        """Create what the store needs (a folder, a container) if missing."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
