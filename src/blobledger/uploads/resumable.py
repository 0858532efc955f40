"""Resumable uploads: a creation whose bytes arrive over many requests (the tus protocol's
model, served at ``/files/`` by :mod:`blobledger.api.routes.tus`).

An upload is an intent that outlives one request. ``create`` is C1 (the pending document and
blob row, leased until the upload expires) plus the upload's row; ``append`` stores a
request's bytes as parts of a staged upload in the store (Azure blocks, S3 multipart parts,
part files on disk) and advances the durable offset after each part by compare-and-set;
``complete`` publishes the parts create-only, hashes what the store then holds, and runs
confirm, C3 and C4 through the ledger's own steps. ``terminate`` abandons the intent.

An upload whose metadata holds the key ``attachment`` stages an attachment instead: A1 (a
pending attachment row owned by nobody, with the upload's row) at creation, and at
completion the same checks, then confirm and A3 (:func:`settle_staged`), never C4. The
application turns the upload's id into a ``StagedBlob`` (:meth:`Ledger.staged_upload`) and
attaches it in its own transaction (A4). ``filename`` (or ``name``) is then the blob's
filename, optional; ``target`` (at most 256 characters) is kept for the application.

How request bytes become parts: a request's body is cut into ``segment``-sized parts (8 MiB);
its last piece becomes a part too if it ends the upload or is at least the store's
``capabilities.min_part_size`` (S3: 5 MiB); a smaller piece is not acknowledged (the offset
answered stops before it, and the client sends it again). A body cut off mid-way keeps every
part stored before the cut, and its tail under the same rule. With a per-request checksum
(``Upload-Checksum``), nothing of the request is recorded until the whole body matched it.

This module never keeps hash state across requests (the whole file's SHA-256 is computed
from the stored bytes at completion), never writes to a completed upload, and never deletes
anything but its own uncommitted parts and a blob tagged ``pending`` whose intent it owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

from blobledger import failpoints
from blobledger._base.names import (
    check_content_type,
    check_document_name,
    new_blob_name,
    new_document_id,
)
from blobledger.db import once_more_if_lost
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    DatabaseUnavailable,
    Digests,
    IntegrityError,
    IntentLost,
    InvalidInput,
    OffsetMismatch,
    StoreError,
    StoreUnavailable,
    UploadAborted,
    UploadGone,
    UploadTooLarge,
)
from blobledger.protocol.attachments import StagedUpload
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import DEFAULT_BUCKET, BlobKind, UploadMode, UploadState
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.transitions.records import Intent, UploadOwner, UploadRecord
from blobledger.protocol.transitions.statements import ATTACHMENT_KEY, HOLD_KEY, new_token
from blobledger.stores.base import Store, verify

log = logging.getLogger("blobledger.resumable")
#: the metadata key that names the bucket an upload creates its document in (none: default)
BUCKET_KEY = "bucket"

SEGMENT = 8 * 1024 * 1024
#: the checksum algorithms a request's ``Upload-Checksum`` may use
CHECKSUMS = ("sha256", "sha1", "md5")


@dataclass(frozen=True)
class Checksum:
    """A request's declared checksum: algorithm and raw digest."""

    algorithm: str
    digest: bytes


def document_name(meta: dict[str, str]) -> str:
    """The document's name from the upload's metadata (``name``, or tus clients'
    ``filename``)."""
    name = meta.get("name") or meta.get("filename")
    if not name:
        raise InvalidInput("the upload's metadata names no document (`name` or `filename`)")
    return check_document_name(name)


def content_type_of(meta: dict[str, str]) -> str:
    return check_content_type(meta.get("content_type") or meta.get("filetype"))


#: the longest ``target`` an attachment upload may declare
TARGET_MAX = 256


def check_target(target: str | None) -> str | None:
    """An attachment upload's ``target``: opaque text for the application, bounded."""
    if target is None:
        return None
    if not isinstance(target, str) or len(target) > TARGET_MAX or not target.isprintable():
        raise InvalidInput(f"target must be printable text of at most {TARGET_MAX} characters")
    return target


def check_sha256(sha256: str | None) -> str | None:
    """A declared whole-file SHA-256: 64 hex digits, lower-cased."""
    if sha256 is None:
        return None
    if len(sha256) != 64 or not _is_hex(sha256):
        raise InvalidInput("sha256 must be 64 hex digits")
    return sha256.lower()


async def begin(ledger: Ledger, length: int, meta: dict[str, str], mode: UploadMode,
                content_type: str, name: str | None = None,
                owner: UploadOwner | None = None) -> UploadRecord:
    """The intent of an upload that outlives a request, and its row: C1 for a document
    named ``name``, or (``meta`` holds ``attachment``) A1 for an attachment whose filename
    is ``meta["filename"]``; ``owner``'s (QuotaExceeded when it holds its share). The
    caller checked ``meta`` and ``content_type``. An insert is never run twice: if the
    connection was lost under it, the upload goes on only if its rows are found under its
    token (:meth:`Ledger.inserted`). Failpoint ``{tus,direct}.after_create``."""
    settings = ledger.settings
    upload_id = new_document_id()
    if ATTACHMENT_KEY in meta:
        filename = meta.get("filename")
        intent = Intent(new_blob_name(settings.blob_prefix, filename or ""), "",
                        BlobKind.ATTACHMENT, new_token(), content_type)
        await ledger.inserted(intent, ledger.transitions.begin_staged_upload(
            intent, filename, upload_id, length, meta, mode=mode, owner=owner))
    else:
        assert name is not None
        bucket = meta.get(BUCKET_KEY) or DEFAULT_BUCKET
        admitted = await ledger.buckets.admit(bucket, content_type, length,
                                              settings.max_upload_bytes)
        intent = Intent(new_blob_name(settings.blob_prefix, name), new_document_id(),
                        BlobKind.CREATE, new_token(), content_type,
                        hold=(meta.get(HOLD_KEY, "").lower() in ("1", "true")
                              or admitted.bucket.hold),
                        owner=owner.id if owner else None, bucket=bucket)
        await ledger.inserted(intent, ledger.transitions.begin_upload(
            intent, name, upload_id, length, "", meta, mode=mode, owner=owner))
    await failpoints.hit(f"{mode.value}.after_create")
    upload = await ledger.transitions.find_upload(upload_id)
    if upload is None:  # swept while this request was paused
        raise UploadGone(f"upload {upload_id!r} was swept")
    return upload


async def record_handle(ledger: Ledger, upload: UploadRecord, handle: str) -> None:
    """The store's handle of the staged upload (a direct upload's: its token's digest),
    recorded by compare-and-set once, while the upload is open and has none. A connection
    lost under it (its COMMIT may have applied) is tried once more on a fresh connection: a
    second run after an applied first loses, and the row the caller reads next holds this
    handle."""
    await once_more_if_lost(lambda: ledger.transitions.set_handle(upload, handle))


def _attachment_meta(meta: dict[str, str]) -> dict[str, str]:
    """A tus attachment upload's metadata, checked: ``filename`` (or ``name``) optional,
    ``target`` bounded."""
    filename = meta.get("filename") or meta.get("name")
    checked = dict(meta)
    if filename:
        checked["filename"] = check_document_name(filename)
    check_target(meta.get("target"))
    return checked


class Resumable:
    """Resumable uploads over one ledger."""

    def __init__(self, ledger: Ledger, segment: int = SEGMENT) -> None:
        self.ledger = ledger
        self.segment = segment
        #: per upload: the lock its writers take turns on, and how many hold or wait for it
        self._writers: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    @contextlib.asynccontextmanager
    async def _turn(self, upload_id: str) -> AsyncIterator[None]:
        """One request at a time writes to an upload (in this process; across processes the
        offset's compare-and-set decides, and the loser stores nothing more)."""
        lock, users = self._writers.setdefault(upload_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._writers[upload_id]

    @property
    def store(self) -> Store:
        return self.ledger.store

    # -- creation -------------------------------------------------------------------------
    async def create(self, length: int, meta: dict[str, str],
                     owner: UploadOwner | None = None) -> UploadRecord:
        """C1 for an upload of ``length`` bytes (``owner``'s: see :class:`UploadOwner`),
        then the store's staged upload."""
        settings = self.ledger.settings
        if length < 0:
            raise InvalidInput("Upload-Length must not be negative")
        if length > settings.max_upload_bytes:
            raise UploadTooLarge(settings.max_upload_bytes)
        if ATTACHMENT_KEY in meta:
            meta, name = _attachment_meta(meta), None
        else:
            name = document_name(meta)
        content_type = content_type_of(meta)
        check_sha256(meta.get("sha256"))
        upload = await begin(self.ledger, length, meta, UploadMode.TUS, content_type, name,
                             owner)
        intent = upload.intent(content_type)
        try:
            handle = await self.store.begin_staged(intent.blob_name, tags=PENDING,
                                                   content_type=content_type)
            if handle:
                await record_handle(self.ledger, upload, handle)
        except BaseException:
            await asyncio.shield(self.give_up(upload, intent))  # nothing stored yet
            raise
        return await self.find(upload.id)

    async def find(self, upload_id: str) -> UploadRecord:
        """The upload; UploadGone if it is unknown or expired."""
        upload = await self.ledger.transitions.find_upload(upload_id)
        if upload is None or upload.mode == UploadMode.S3:  # the S3 endpoint's own
            raise UploadGone(f"no upload {upload_id!r}")
        if upload.expired and upload.state == UploadState.OPEN:
            raise UploadGone(f"upload {upload_id!r} expired")
        return upload

    # -- parts ----------------------------------------------------------------------------
    async def append(
        self, upload: UploadRecord, offset: int, body: AsyncIterable[bytes],
        declared: int | None = None, checksum: Checksum | None = None,
    ) -> int:
        """Store a request's bytes from ``offset``; the new durable offset. Requests to one
        upload take turns (:meth:`_turn`): each reads the upload's row once it has its
        turn, so of two requests at one offset the second finds the first's offset and
        writes nothing. OffsetMismatch (409, with the offset the upload is at) if ``offset``
        is not the stored one or the upload is complete, UploadTooLarge (413) for bytes past
        the declared length, IntegrityError for a checksum mismatch."""
        async with self._turn(upload.id):
            return await self._append(await self.find(upload.id), offset, body, declared,
                                      checksum)

    async def _append(
        self, upload: UploadRecord, offset: int, body: AsyncIterable[bytes],
        declared: int | None, checksum: Checksum | None,
    ) -> int:
        if upload.state != UploadState.OPEN:
            if offset == upload.length and declared in (None, 0):
                return upload.length
            raise OffsetMismatch("the upload is complete", upload.length)
        if offset != upload.offset:
            raise OffsetMismatch(f"the upload is at offset {upload.offset}, not {offset}",
                                 upload.offset)
        remaining = upload.length - upload.offset
        if declared is not None and declared > remaining:
            raise UploadTooLarge(upload.length)
        writer = _PartWriter(self, upload, checksum)
        try:
            async for chunk in body:
                await writer.feed(chunk)
        except (UploadAborted, asyncio.CancelledError, OSError, TimeoutError):
            if checksum is None:  # keep what arrived before the cut
                await asyncio.shield(writer.flush_tail(final_only=False))
            raise
        except BlobLedgerError:
            raise
        except Exception:
            if checksum is None:
                await asyncio.shield(writer.flush_tail(final_only=False))
            raise
        await writer.finish()
        return writer.recorded

    # -- completion -----------------------------------------------------------------------
    async def complete(self, upload: UploadRecord) -> Document | StagedUpload:
        """Publish the parts create-only, hash what the store holds, then confirm, C3, C4
        (an attachment upload: confirm and A3). Safe to repeat after a crash anywhere (a
        blob already published is hashed again)."""
        if upload.offset != upload.length:
            raise OffsetMismatch("the upload is not complete", upload.offset)
        intent = upload.intent(content_type_of(upload.meta))
        try:
            digests = await self._publish(upload, intent)  # C2's end
            await failpoints.hit("tus.after_publish")
        except IntegrityError:
            await asyncio.shield(self.give_up(upload, intent))
            raise
        except (StoreError, StoreUnavailable) as exc:
            # Terminated (or swept) while its parts were being published: the parts went
            # with it, so the store refuses the publication. The client is told the upload
            # is gone, not that the store failed. Or a twin completion published them and
            # finished first (the local store's parts go with its publication): the client
            # is told what the twin made.
            await self._gone_if_ended(upload, intent, exc)
            made = await _made_by_another(self, upload.id)
            if made is not None:
                return made
            raise
        try:
            return await finish(self, upload, intent, digests, "tus")
        except IntentLost as exc:  # published all the same (Azurite commits cleared blocks)
            await self._gone_if_ended(upload, intent, exc)
            raise

    async def _gone_if_ended(self, upload: UploadRecord, intent: Intent,
                             exc: BaseException) -> None:
        """UploadGone if the upload's row is gone (terminated or swept) since it was read.
        A publication that applied all the same (Azurite commits the blocks of a blob the
        sweeper's delete found absent; an answer lost with every retry's) made a ``pending``
        blob whose row is gone: removed here (conditioned on ``pending``, and only while no
        row names it), not left for ``reconcile --fix``."""
        if await self.ledger.transitions.find_upload(upload.id) is None:
            await asyncio.shield(self.ledger.drop_lost(intent))
            raise UploadGone(f"upload {upload.id!r} was terminated or swept while it was "
                             "being completed") from exc

    async def _publish(self, upload: UploadRecord, intent: Intent) -> Digests:
        store = self.store
        try:
            await store.stat(intent.blob_name)
        except BlobNotFound:
            try:
                return await store.commit_staged(
                    intent.blob_name, upload.handle, upload.parts, tags=PENDING,
                    content_type=intent.content_type)
            except BlobAlreadyExists:
                pass  # a concurrent completion of the same upload published it
        return await store.digest_stored(intent.blob_name)

    async def document(self, upload: UploadRecord) -> Document | StagedUpload | None:
        """The document a completed upload made, or the blob it staged (None if it is gone
        since, or attached)."""
        try:
            if upload.attachment:
                return await self.ledger.staged_upload(upload.id)
            return await self.ledger.get(upload.document_id)
        except BlobLedgerError:
            return None

    # -- termination ----------------------------------------------------------------------
    async def terminate(self, upload: UploadRecord) -> None:
        """Abandon the upload: its intent to the deletion path, its parts dropped.
        DatabaseUnavailable when the database could not say and the upload is still open
        (its transaction lost with the connection, COMMIT included): not terminated, and
        never said to be; a retry terminates it (or the sweeper, once it expires).
        IntentLost when a completion or the sweeper took the upload first: also when the
        answer was lost and the upload is found completed (the same answer as a race lost
        in plain sight)."""
        if upload.state != UploadState.OPEN:
            raise OffsetMismatch("the upload is complete: delete the document instead",
                                 upload.length)
        intent = upload.intent(content_type_of(upload.meta))
        await failpoints.hit("upload.before_terminate")
        abandoned = await self.ledger.abandon(intent)
        if abandoned is False:
            raise IntentLost("the upload's intent was taken over (swept)")
        if abandoned is None:
            again = await self.ledger.transitions.find_upload(upload.id)
            if again is not None and again.state == UploadState.OPEN and not again.expired:
                raise DatabaseUnavailable("the upload could not be terminated: retry")
            if again is not None and again.state == UploadState.DONE:
                raise IntentLost("the upload was completed first")
        await self._drop_parts(upload)

    async def give_up(self, upload: UploadRecord, intent: Intent) -> bool:
        """A lying client: the intent to the deletion path and the parts dropped, only if
        the intent is still ours and no completion verified the upload (a duplicate
        completion never destroys what its twin verified); whether it was given up."""
        if await self.ledger.give_up(intent, upload.id) is False:
            return False
        await self._drop_parts(upload)
        return True

    async def _drop_parts(self, upload: UploadRecord) -> None:
        try:
            await self.store.abort_staged(upload.blob_name, upload.handle)
        except BlobLedgerError as exc:
            log.warning("dropping the parts of %s failed (%s); the reconciler reports them",
                        upload.blob_name, type(exc).__name__)


async def finish(owner: Resumable, upload: UploadRecord, intent: Intent, digests: Digests,
                 points: str) -> Document | StagedUpload:
    """:func:`settle_staged` for an attachment upload, :func:`settle` for a document's.

    Two completions of one upload may run at once (a client retrying ``complete``, a HEAD
    on another instance) and share its token: the one that loses the confirm or C4 because
    the other finished first answers what the other made, not ``IntentLost``."""
    try:
        if upload.attachment:
            return await settle_staged(owner, upload, intent, digests, f"{points}.stage")
        return await settle(owner, upload, intent, digests, points)
    except IntentLost:
        made = await _made_by_another(owner, upload.id)
        if made is None:
            raise
        return made


async def _made_by_another(owner: Resumable, upload_id: str) -> Document | StagedUpload | None:
    """After a lost confirm or C4: what the upload made, if it is done (a twin completion
    finished it, or the sweeper rolled it forward). A document's upload still open beside
    its ready document (an older release died between C4 and closing it) is closed here,
    then read again whoever closed it (a twin's close may land first)."""
    transitions = owner.ledger.transitions
    found = await transitions.find_upload(upload_id)
    if found is not None and found.state == UploadState.OPEN and not found.attachment:
        # won or lost to a twin closing it at the same moment: either way read it again
        await failpoints.hit("upload.before_close_settled")
        await transitions.close_settled_upload(found)
        found = await transitions.find_upload(upload_id)
    if found is None or found.state != UploadState.DONE:
        return None
    return await owner.document(found)


async def _verified(owner: Resumable, upload: UploadRecord, digests: Digests,
                    points: str) -> None:
    """The stored bytes' size and the declared SHA-256 checked (IntegrityError), and the
    verified SHA-256 recorded on the upload."""
    if digests.size != upload.length:
        raise IntegrityError(
            f"the store holds {digests.size} bytes, not the {upload.length} declared")
    verify(digests, upload.meta.get("sha256"), None)
    await owner.ledger.transitions.record_verified(upload, digests.sha256)
    await failpoints.hit(f"{points}.after_verify")


async def settle(owner: Resumable, upload: UploadRecord, intent: Intent, digests: Digests,
                 points: str) -> Document:
    """The end of any upload that outlives a request, once ``digests`` were computed from
    the stored bytes: their size and declared SHA-256 checked, the verified SHA-256
    recorded, then confirm, C3 and C4 (the ledger's own steps; C4 closes the upload in its
    own transaction; with the deferred retag only C4, which leaves the retag owed). A
    mismatch gives the upload up (IntegrityError). ``points`` prefixes the failpoints."""
    ledger = owner.ledger
    try:
        await _verified(owner, upload, digests, points)
        if not ledger.transitions.deferred:  # deferred: confirm folds into C4, C3 after it
            await ledger.confirm(intent)
            await failpoints.hit(f"{points}.after_confirm")
            await ledger.tag_committed(intent)  # C3
            await failpoints.hit(f"{points}.after_tag")
    except IntegrityError:
        await asyncio.shield(owner.give_up(upload, intent))
        raise
    doc = await ledger.commit_create(intent, digests, upload.id)  # C4, the upload done
    await failpoints.hit(f"{points}.after_commit")
    return doc


async def settle_staged(owner: Resumable, upload: UploadRecord, intent: Intent,
                        digests: Digests, points: str) -> StagedUpload:
    """:func:`settle` for an attachment upload: the same checks, then confirm (the staged
    intent still this upload's, its digests recorded) and A3 (tagged committed), and the
    upload done; never C4: the blob stays staged, owned by nobody, until the application's
    transaction attaches it (A4) or the sweeper removes it. Failpoints
    ``{points}.after_{verify,confirm,tag,finish}``."""
    ledger = owner.ledger
    try:
        await _verified(owner, upload, digests, points)
        await ledger.confirm_staged(intent, digests)
        await failpoints.hit(f"{points}.after_confirm")
        await ledger.tag_committed(intent)  # A3
        await failpoints.hit(f"{points}.after_tag")
    except IntegrityError:
        await asyncio.shield(owner.give_up(upload, intent))
        raise
    await ledger.transitions.finish_upload(upload)
    await failpoints.hit(f"{points}.after_finish")
    return StagedUpload(name=intent.blob_name, size=digests.size, sha256=digests.sha256,
                        md5=digests.md5, content_type=intent.content_type,
                        filename=upload.meta.get("filename"), attempt=intent.attempt,
                        upload_id=upload.id, target=upload.meta.get("target"))


class _PartWriter:
    """One request's bytes, cut into parts; the offset recorded after each part (or once,
    after the request's checksum matched)."""

    def __init__(self, owner: Resumable, upload: UploadRecord,
                 checksum: Checksum | None) -> None:
        self.owner = owner
        self.upload = upload
        self.checksum = checksum
        self.hasher = hashlib.new(checksum.algorithm) if checksum else None
        self.parts: list[str] = list(upload.parts)
        self.position = upload.offset  # bytes stored in parts (this request's included)
        self.recorded = upload.offset  # bytes recorded in the database
        self.buffer = bytearray()

    async def feed(self, chunk: bytes) -> None:
        if self.position + len(self.buffer) + len(chunk) > self.upload.length:
            raise UploadTooLarge(self.upload.length)
        if self.hasher is not None:
            self.hasher.update(chunk)
        self.buffer += chunk
        while len(self.buffer) >= self.owner.segment:
            piece = bytes(self.buffer[:self.owner.segment])
            del self.buffer[:self.owner.segment]
            await self._store(piece)

    async def flush_tail(self, *, final_only: bool) -> None:
        """After a cut: the buffered tail kept as a part where it can be (a failure only
        logged: the request already failed)."""
        try:
            await self._flush(final_only=final_only)
        except BlobLedgerError as exc:
            log.warning("keeping the tail of a cut request failed (%s)", type(exc).__name__)

    async def _flush(self, *, final_only: bool) -> None:
        """The buffered tail as a part, if the store accepts a part that small here."""
        if not self.buffer:
            return
        ends = self.position + len(self.buffer) == self.upload.length
        big = len(self.buffer) >= self.owner.store.capabilities.min_part_size
        if ends or (big and not final_only):
            piece = bytes(self.buffer)
            self.buffer.clear()
            await self._store(piece)

    async def finish(self) -> None:
        if self.hasher is not None and self.checksum is not None \
                and self.hasher.digest() != self.checksum.digest:
            raise IntegrityError(f"the request's {self.checksum.algorithm} does not match "
                                 "Upload-Checksum")
        await self._flush(final_only=False)
        if self.hasher is not None and self.position != self.recorded:
            await self._record()

    async def _store(self, piece: bytes) -> None:
        upload = self.upload
        part = await self.owner.store.stage(upload.blob_name, upload.handle,
                                            len(self.parts) + 1, piece)
        self.parts.append(part)
        self.position += len(piece)
        await failpoints.hit("tus.after_part")
        if self.hasher is None:
            await self._record()

    async def _record(self) -> None:
        transitions = self.owner.ledger.transitions
        if not await transitions.record_parts(self.upload, self.recorded, self.position,
                                              self.parts):
            now = await transitions.find_upload(self.upload.id)
            raise OffsetMismatch("another request advanced the upload first",
                                 self.recorded if now is None else now.offset)
        self.recorded = self.position


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)

