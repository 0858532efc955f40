"""Direct uploads: the client puts a document's bytes into the store itself (served at
``/uploads`` by :mod:`blobledger.api.routes.direct`).

``begin`` is C1 (the pending document and blob row, leased until the URL expires) plus the
upload's row, and returns where to put the bytes: the store's own short-lived, create-only
URL for exactly that blob name (:meth:`blobledger.stores.base.Store.direct_put`: an Azure
SAS with the create permission alone, an S3 presigned PUT signed with ``If-None-Match: *``
and the declared size as ``Content-Length``), or, where the store has none (local disk), a
URL of ``serve`` itself guarded by a token whose SHA-256 alone is kept, which takes no byte
past the declared size. ``complete`` never trusts the client: it requires the blob to be
tagged ``pending`` (or, on Azure, where the client cannot tag, untagged), hashes what the
store holds, checks the declared size and SHA-256, then runs confirm, C3 and C4
(:func:`blobledger.uploads.resumable.settle`). A client that lies about its bytes, or tags its own
blob ``committed``, gets its upload given up (the sweeper never rolls an unverified upload
forward). Expired and abandoned uploads are swept like any intent.

``begin(..., attachment=True)`` stages an attachment instead of creating a document: A1 (a
pending attachment row owned by nobody, with the upload's row; ``filename`` optional, no
document name) and, at completion, the same checks, then confirm and A3
(:func:`blobledger.uploads.resumable.settle_staged`), never C4. The application turns the upload's
id into a ``StagedBlob`` (:meth:`Ledger.staged_upload`, which also gives the client's
``target``) and attaches it in its own transaction (A4).

This module never writes over a blob (every put here is create-only) and never deletes a
blob it has not handed to the deletion path by compare-and-set.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections.abc import AsyncIterable
from dataclasses import dataclass
from datetime import datetime

from blobledger import failpoints
from blobledger._base.names import check_content_type, check_document_name
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    IntegrityError,
    IntentLost,
    InvalidInput,
    OffsetMismatch,
    StoreUnavailable,
    UploadGone,
    UploadTooLarge,
)
from blobledger.protocol.attachments import StagedUpload
from blobledger.protocol.documents import Document, limit_size
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import STATE_TAG, BlobState, UploadMode, UploadState, as_utc
from blobledger.protocol.transitions.records import UploadOwner, UploadRecord
from blobledger.protocol.transitions.statements import ATTACHMENT_KEY
from blobledger.stores.base import DirectPut
from blobledger.uploads.resumable import (
    BUCKET_KEY,
    Resumable,
    begin,
    check_sha256,
    check_target,
    finish,
    record_handle,
)


@dataclass(frozen=True)
class Began:
    """A direct upload's record and where its bytes go: the store's URL, or (``target`` None)
    ``serve``'s own URL with ``token``."""

    upload: UploadRecord
    target: DirectPut | None
    token: str | None

    @property
    def expires_at(self) -> datetime:
        return as_utc(self.upload.expires_at)


def _token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class DirectUploads:
    """Direct uploads over one ledger (the ``Resumable`` it shares the completion with)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.resumable = Resumable(ledger)

    async def begin(self, name: str | None, size: int, content_type: str | None = None,
                    sha256: str | None = None, *, attachment: bool = False,
                    filename: str | None = None, target: str | None = None,
                    owner: UploadOwner | None = None, bucket: str | None = None) -> Began:
        """C1 (a document named ``name``) or, with ``attachment``, A1 (an attachment with
        an optional ``filename`` and ``target``), ``owner``'s (see :class:`UploadOwner`),
        and the URL to put ``size`` bytes to."""
        settings = self.ledger.settings
        content_type = check_content_type(content_type)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidInput("size must be a non-negative integer")
        if size > settings.max_upload_bytes:
            raise UploadTooLarge(settings.max_upload_bytes)
        meta = {"content_type": content_type}
        if attachment:
            if name is not None:
                raise InvalidInput("an attachment upload has no document `name` "
                                   "(give its `filename`)")
            meta[ATTACHMENT_KEY] = "true"
            if filename is not None:
                meta["filename"] = check_document_name(filename)
            if (target := check_target(target)) is not None:
                meta["target"] = target
        else:
            if name is None:
                raise InvalidInput("a document upload needs a `name`")
            if filename is not None or target is not None:
                raise InvalidInput("`filename` and `target` are for attachment uploads")
            name = meta["name"] = check_document_name(name)
            if bucket is not None:
                meta[BUCKET_KEY] = bucket
        if (sha256 := check_sha256(sha256)) is not None:
            meta["sha256"] = sha256
        upload = await begin(self.ledger, size, meta, UploadMode.DIRECT, content_type, name,
                             owner)
        where = await self.ledger.store.direct_put(
            upload.blob_name, size=size, tags=PENDING, content_type=content_type,
            expires_in=settings.direct_upload_expiry)
        token = None
        if where is None:
            token = secrets.token_urlsafe(32)
            await record_handle(self.ledger, upload, _token_digest(token))
            upload = await self.find(upload.id)
        return Began(upload, where, token)

    async def find(self, upload_id: str) -> UploadRecord:
        """The direct upload; UploadGone if unknown, expired or swept."""
        upload = await self.resumable.find(upload_id)
        if upload.mode != UploadMode.DIRECT:
            raise UploadGone(f"no direct upload {upload_id!r}")
        return upload

    async def receive(self, upload_id: str, token: str, body: AsyncIterable[bytes],
                      declared: int | None = None) -> None:
        """The bytes of an upload whose store has no URL of its own, sent to ``serve``: a
        create-only put of the blob (409 if it was already uploaded: never overwritten) of
        at most the upload's size (413 before any byte is read if the request's
        ``declared`` length passes it, and as soon as its bytes do),
        then a compare-and-set that the intent is still the upload's: if it was swept
        meanwhile, the blob just put is deleted (its row gone; conditioned on ``pending``)
        and UploadGone (410), never 201. Failpoints ``direct.before_upload`` (the token
        checked) and ``direct.after_upload``."""
        upload = await self.find(upload_id)
        if not upload.handle or not hmac.compare_digest(upload.handle, _token_digest(token)):
            raise UploadGone(f"no direct upload {upload_id!r} for this token")
        if upload.state != UploadState.OPEN:
            raise OffsetMismatch("the upload is complete", upload.length)
        if declared is not None and declared > upload.length:
            raise UploadTooLarge(upload.length)
        await failpoints.hit("direct.before_upload")
        try:
            await self.ledger.store.put(
                upload.blob_name, limit_size(body, upload.length), tags=PENDING,
                content_type=upload.meta.get("content_type"),
                expected_sha256=upload.meta.get("sha256"))
        except BlobAlreadyExists:
            raise OffsetMismatch("the bytes were uploaded already", upload.length) from None
        except StoreUnavailable as exc:  # the sweeper discarded the staged bytes?
            if not await self.ledger.transitions.confirm_received(upload):
                raise UploadGone(f"direct upload {upload_id!r} was swept") from exc
            raise
        await failpoints.hit("direct.after_upload")
        if not await self.ledger.transitions.confirm_received(upload):
            await self.ledger.drop_lost(upload.intent("application/octet-stream"))
            raise UploadGone(f"direct upload {upload_id!r} was swept while its bytes arrived")

    async def complete(self, upload_id: str) -> Document | StagedUpload:
        """Check what the store holds against the upload's declaration, then C3 and C4 (an
        attachment upload: A3; the staged blob). Failpoint ``direct.before_check`` (the
        upload's row read, its tags not yet)."""
        upload = await self.find(upload_id)
        if upload.state != UploadState.OPEN:
            return await self._made(upload)
        store = self.ledger.store
        await failpoints.hit("direct.before_check")
        try:
            tags = await store.get_tags(upload.blob_name)
        except BlobNotFound:
            raise OffsetMismatch("nothing has been uploaded yet", 0) from None
        if tags.get(STATE_TAG) != PENDING[STATE_TAG] and upload.sha256 is None:
            # a twin completion may have verified and tagged it since this one read the row
            upload = await self.find(upload_id)
            if upload.state != UploadState.OPEN:
                return await self._made(upload)
        intent = upload.intent(upload.meta.get("content_type") or "application/octet-stream")
        try:
            # committed is ours only after we verified it (a completion retried after C3)
            ours = tags.get(STATE_TAG) == BlobState.COMMITTED and upload.sha256 is not None
            # no tags at all counts as pending: an Azure client's SAS cannot write tags
            if tags and tags.get(STATE_TAG) != PENDING[STATE_TAG] and not ours:
                raise IntegrityError(f"the uploaded blob is tagged {tags}, not {PENDING}")
            digests = await store.digest_stored(upload.blob_name)  # what the store holds
            if ours and digests.sha256 != upload.sha256:
                raise IntegrityError("the stored bytes changed since they were verified")
        except IntegrityError:
            await asyncio.shield(self.resumable.give_up(upload, intent))
            raise
        return await finish(self.resumable, upload, intent, digests, "direct")

    async def _made(self, upload: UploadRecord) -> Document | StagedUpload:
        """What a completed upload made: the staged blob or the document (UploadGone if the
        document is gone since)."""
        if upload.attachment:
            return await self.ledger.staged_upload(upload.id)
        doc = await self.resumable.document(upload)
        if doc is None:
            raise UploadGone(f"upload {upload.id!r} completed and its document is gone")
        assert isinstance(doc, Document)
        return doc

    async def cancel(self, upload_id: str) -> None:
        """Abandon the upload: its intent to the deletion path."""
        upload = await self.find(upload_id)
        if upload.state != UploadState.OPEN:
            raise OffsetMismatch("the upload is complete: delete the document instead",
                                 upload.length)
        if await self.ledger.abandon(upload.intent("application/octet-stream")) is False:
            raise IntentLost("the upload's intent was taken over (swept)")
