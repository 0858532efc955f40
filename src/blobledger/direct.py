"""Direct uploads: the client puts a document's bytes into the store itself (served at
``/uploads`` by :mod:`blobledger.api.routes.direct`).

``begin`` is C1 (the pending document and blob row, leased until the URL expires) plus the
upload's row, and returns where to put the bytes: the store's own short-lived, create-only
URL for exactly that blob name (:meth:`blobledger.stores.base.Store.direct_put`: an Azure
SAS with create and tag permissions, an S3 presigned PUT signed with ``If-None-Match: *``),
or, where the store has none (local disk), a URL of ``serve`` itself guarded by a token whose
SHA-256 alone is kept. ``complete`` never trusts the client: it requires the blob to be
tagged ``pending``, hashes what the store holds, checks the declared size and SHA-256, then
runs confirm, C3 and C4 (:func:`blobledger.resumable.settle`). A client that lies about its
bytes, or tags its own blob ``committed``, gets its upload given up (the sweeper never rolls
an unverified upload forward). Expired and abandoned uploads are swept like any intent.

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
from blobledger.documents import Document, limit_size
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    IntegrityError,
    IntentLost,
    InvalidInput,
    OffsetMismatch,
    UploadGone,
    UploadTooLarge,
)
from blobledger.ledger import Ledger
from blobledger.models import PENDING_TAG as PENDING
from blobledger.models import STATE_TAG, BlobKind, BlobState, UploadMode, UploadState, as_utc
from blobledger.names import check_content_type, check_document_name, new_blob_name, new_document_id
from blobledger.resumable import Resumable, settle
from blobledger.stores.base import DirectPut
from blobledger.transitions import Intent, UploadRecord, new_token


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

    async def begin(self, name: str, size: int, content_type: str | None = None,
                    sha256: str | None = None) -> Began:
        """C1 and the URL to put ``size`` bytes to."""
        settings = self.ledger.settings
        name = check_document_name(name)
        content_type = check_content_type(content_type)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidInput("size must be a non-negative integer")
        if size > settings.max_upload_bytes:
            raise UploadTooLarge(settings.max_upload_bytes)
        meta = {"name": name, "content_type": content_type}
        if sha256 is not None:
            if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256.lower()):
                raise InvalidInput("sha256 must be 64 hex digits")
            meta["sha256"] = sha256.lower()
        intent = Intent(new_blob_name(settings.blob_prefix, name), new_document_id(),
                        BlobKind.CREATE, new_token(), content_type)
        upload_id = new_document_id()
        await self.ledger.transitions.begin_upload(intent, name, upload_id, size, "", meta,
                                                   mode=UploadMode.DIRECT)
        await failpoints.hit("direct.after_create")
        upload = await self.find(upload_id)
        target = await self.ledger.store.direct_put(
            intent.blob_name, tags=PENDING, content_type=content_type,
            expires_in=settings.direct_upload_expiry)
        token = None
        if target is None:
            token = secrets.token_urlsafe(32)
            await self.ledger.transitions.set_handle(upload, _token_digest(token))
            upload = await self.find(upload_id)
        return Began(upload, target, token)

    async def find(self, upload_id: str) -> UploadRecord:
        """The direct upload; UploadGone if unknown, expired or swept."""
        upload = await self.resumable.find(upload_id)
        if upload.mode != UploadMode.DIRECT:
            raise UploadGone(f"no direct upload {upload_id!r}")
        return upload

    async def receive(self, upload_id: str, token: str, body: AsyncIterable[bytes]) -> None:
        """The bytes of an upload whose store has no URL of its own, sent to ``serve``: a
        create-only put of the blob (409 if it was already uploaded: never overwritten)."""
        upload = await self.find(upload_id)
        if not upload.handle or not hmac.compare_digest(upload.handle, _token_digest(token)):
            raise UploadGone(f"no direct upload {upload_id!r} for this token")
        if upload.state != UploadState.OPEN:
            raise OffsetMismatch("the upload is complete", upload.length)
        try:
            await self.ledger.store.put(
                upload.blob_name, limit_size(body, upload.length), tags=PENDING,
                content_type=upload.meta.get("content_type"),
                expected_sha256=upload.meta.get("sha256"))
        except BlobAlreadyExists:
            raise OffsetMismatch("the bytes were uploaded already", upload.length) from None
        await failpoints.hit("direct.after_upload")

    async def complete(self, upload_id: str) -> Document:
        """Check what the store holds against the upload's declaration, then C3 and C4."""
        upload = await self.find(upload_id)
        if upload.state != UploadState.OPEN:
            doc = await self.resumable.document(upload)
            if doc is None:
                raise UploadGone(f"upload {upload_id!r} completed and its document is gone")
            return doc
        intent = upload.intent(upload.meta.get("content_type") or "application/octet-stream")
        store = self.ledger.store
        try:
            tags = await store.get_tags(upload.blob_name)
        except BlobNotFound:
            raise OffsetMismatch("nothing has been uploaded yet", 0) from None
        try:
            # committed is ours only after we verified it (a completion retried after C3)
            ours = tags.get(STATE_TAG) == BlobState.COMMITTED and upload.sha256 is not None
            if tags.get(STATE_TAG) != PENDING[STATE_TAG] and not ours:
                raise IntegrityError(f"the uploaded blob is tagged {tags}, not {PENDING}")
            digests = await store.digest_stored(upload.blob_name)  # what the store holds
            if ours and digests.sha256 != upload.sha256:
                raise IntegrityError("the stored bytes changed since they were verified")
        except IntegrityError:
            await asyncio.shield(self.resumable.give_up(upload, intent))
            raise
        return await settle(self.resumable, upload, intent, digests, "direct")

    async def cancel(self, upload_id: str) -> None:
        """Abandon the upload: its intent to the deletion path."""
        upload = await self.find(upload_id)
        if upload.state != UploadState.OPEN:
            raise OffsetMismatch("the upload is complete: delete the document instead",
                                 upload.length)
        if await self.ledger.abandon(upload.intent("application/octet-stream")) is False:
            raise IntentLost("the upload's intent was taken over (swept)")
