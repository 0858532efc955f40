"""The steps of resumable and direct uploads (``Resumable``, ``Direct``): C1 or A1 with
the upload's row, the durable offset advanced by compare-and-set, the verified digest, the
upload closed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger.errors import QuotaExceeded
from blobledger.protocol.models import BlobKind, UploadMode, UploadState
from blobledger.protocol.transitions.base import Steps
from blobledger.protocol.transitions.records import Intent, UploadOwner, UploadRecord
from blobledger.protocol.transitions.statements import (
    ATTACHMENT_KEY,
    NOW,
    PENDING,
    _close_settled_upload,
    _confirm_received,
    _count,
    _finish_upload,
    _insert_blob,
    _insert_document,
    _insert_upload,
    _open_uploads,
    _record_parts,
    _refused_c1,
    _reserved_names,
    blobs,
    uploads,
)


async def _within_quota(conn: Any, owner: UploadOwner | None, names: bool,
                        times: dict[str, float]) -> None:
    """QuotaExceeded if ``owner`` already holds its share (checked inside the creating
    transaction; concurrent creations by one owner may pass it together, at most one each)."""
    if owner is None:
        return
    params = dict(u_owner=owner.id, **times)
    held = int((await conn.execute(_open_uploads, params)).scalar_one())
    if held >= owner.max_open:
        raise QuotaExceeded("too-many-open-uploads",
                            f"this token already has {held} open uploads (at most "
                            f"{owner.max_open}): complete or terminate some first")
    if names and int((await conn.execute(_reserved_names, params)).scalar_one()) \
            >= owner.max_names:
        raise QuotaExceeded("too-many-reserved-names",
                            f"this token's open uploads already hold {owner.max_names} "
                            "document names: complete or terminate some first")



class UploadSteps(Steps):
    """An upload's rows: created with its intent, advanced, closed."""

    # -- resumable uploads ----------------------------------------------------------------
    async def begin_upload(self, intent: Intent, name: str, upload_id: str, length: int,
                           handle: str, meta: dict[str, str], *,
                           mode: UploadMode = UploadMode.TUS,
                           owner: UploadOwner | None = None) -> None:
        """C1 of a resumable or direct upload: the pending document, its blob row (this
        upload's, leased until the upload expires, so no sweeper takes it before) and the
        upload's row (offset 0, ``owner``'s), in one transaction. NameTaken if the name is
        taken, BucketNotFound if the bucket was deleted since its lookup, QuotaExceeded if
        ``owner`` holds its share of open uploads or names."""
        times = self.times(lease=self._expiry(mode))
        try:
            async with self.db.transaction() as conn:
                await _within_quota(conn, owner, True, times)
                await conn.execute(_insert_document, dict(
                    id=intent.document_id, bucket=intent.bucket, name=name,
                    blob_name=intent.blob_name,
                    content_type=intent.content_type, **self._holding(intent, name),
                    **times))
                await conn.execute(_insert_blob, dict(
                    name=intent.blob_name, document_id=intent.document_id,
                    kind=intent.kind.value, content_type=intent.content_type,
                    attempt=intent.attempt, **times))
                await conn.execute(_insert_upload, dict(
                    id=upload_id, mode=mode.value, blob_name=intent.blob_name,
                    document_id=intent.document_id,
                    attempt=intent.attempt, length=length, handle=handle,
                    meta=json.dumps(meta), owner=owner.id if owner else None, **times))
        except DBIntegrityError as exc:
            raise _refused_c1(exc, intent.bucket, name) from None

    async def begin_staged_upload(self, intent: Intent, filename: str | None, upload_id: str,
                                  length: int, meta: dict[str, str], *,
                                  mode: UploadMode = UploadMode.TUS,
                                  owner: UploadOwner | None = None) -> None:
        """A1 of an attachment that arrives as a resumable or direct upload: the pending
        attachment row, owned by no document (this upload's, leased until the upload
        expires) and the upload's row (offset 0, no document: ``document_id`` empty,
        ``owner``'s), in one transaction; QuotaExceeded if ``owner`` holds its share."""
        assert intent.kind == BlobKind.ATTACHMENT and ATTACHMENT_KEY in meta
        times = self.times(lease=self._expiry(mode))
        async with self.db.transaction() as conn:
            await _within_quota(conn, owner, False, times)
            await conn.execute(_insert_blob, dict(
                name=intent.blob_name, document_id=None, kind=intent.kind.value,
                content_type=intent.content_type, attempt=intent.attempt, filename=filename,
                **times))
            await conn.execute(_insert_upload, dict(
                id=upload_id, mode=mode.value, blob_name=intent.blob_name, document_id="",
                attempt=intent.attempt, length=length, handle="", meta=json.dumps(meta),
                owner=owner.id if owner else None, **times))

    async def set_handle(self, upload: UploadRecord, handle: str) -> bool:
        """The store's handle of the staged upload (started after C1), once."""
        async with self.db.transaction() as conn:
            won = await conn.execute(update(uploads).where(
                uploads.c.id == upload.id, uploads.c.attempt == upload.attempt,
                uploads.c.state == UploadState.OPEN.value, uploads.c.handle == "",
            ).values(handle=handle))
        return _count(won) == 1

    async def find_upload(self, upload_id: str) -> UploadRecord | None:
        """The upload's row, or None if there is none (never made, finished and forgotten,
        terminated, or swept with its intent)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(
                select(uploads, (uploads.c.expires_at <= NOW).label("expired"))
                .where(uploads.c.id == upload_id), self.times())).one_or_none()
        if row is None:
            return None
        return UploadRecord(row.id, UploadMode(row.mode), row.blob_name, row.document_id,
                            row.attempt, row.state,
                            row.length, row.offset, row.handle, json.loads(row.parts),
                            json.loads(row.meta), row.expires_at, bool(row.expired),
                            row.sha256)

    async def record_parts(self, upload: UploadRecord, seen: int, offset: int,
                           parts: Sequence[str]) -> bool:
        """The durable offset: ``offset`` bytes are stored in ``parts``, only if the upload
        is still open, unexpired, owned by its token and at ``seen`` (a concurrent request
        that advanced it first wins; this one loses and stores nothing more)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_record_parts, dict(
                u_id=upload.id, b_attempt=upload.attempt, u_seen=seen, u_offset=offset,
                u_parts=json.dumps(list(parts)), **self.times()))
        return _count(won) == 1

    async def record_verified(self, upload: UploadRecord, sha256: str) -> bool:
        """Before C3: the SHA-256 the service computed from the stored bytes, only while the
        upload and its intent are still this upload's. The sweeper rolls a committed
        upload forward only if this was recorded (a client that tagged its own direct
        upload ``committed`` gets it deleted instead)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(update(uploads).where(
                uploads.c.id == upload.id, uploads.c.state == UploadState.OPEN.value,
                uploads.c.attempt == upload.attempt,
                select(blobs.c.name).where(
                    blobs.c.name == uploads.c.blob_name, blobs.c.state == PENDING,
                    blobs.c.attempt == upload.attempt).exists(),
            ).values(sha256=sha256, changed_at=NOW), self.times())
        return _count(won) == 1

    async def confirm_received(self, upload: UploadRecord) -> bool:
        """After ``serve`` stored a direct upload's bytes: the upload is still open and its
        intent still this upload's, by compare-and-set on the upload's row (the intent's
        lease is left as the URL's expiry set it). False if the intent was lost (swept)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_confirm_received, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))
        return _count(won) == 1

    async def unverified(self, names: Sequence[str]) -> dict[str, str | None]:
        """Which of these blobs belong to uploads: name -> the verified SHA-256 (or None)."""
        async with self.db.transaction(readonly=True) as conn:
            rows = (await conn.execute(select(uploads.c.blob_name, uploads.c.sha256).where(
                uploads.c.blob_name.in_(names)))).all()
        return {r.blob_name: r.sha256 for r in rows}

    async def finish_upload(self, upload: UploadRecord) -> bool:
        """After A3 (a staged attachment's upload): the upload is done; nothing is ever
        written to it again. A document's upload ends with C4 itself (``commit_create``)."""
        async with self.db.transaction() as conn:
            won = await conn.execute(_finish_upload, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))
        return _count(won) == 1

    async def close_settled_upload(self, upload: UploadRecord) -> None:
        """A document's upload still open although its document is ready (an older release
        made C4 and the upload's end two transactions, and died between them): done, by
        compare-and-set on the upload's token and the document ready with its blob. The
        caller reads the upload again: a twin may have closed it at the same moment."""
        async with self.db.transaction() as conn:
            await conn.execute(_close_settled_upload, dict(
                u_id=upload.id, b_attempt=upload.attempt, **self.times()))

    async def upload_live(self, blob_name: str) -> bool:
        """Whether an open, unexpired upload owns the blob name (its parts are in flight)."""
        async with self.db.transaction(readonly=True) as conn:
            found = (await conn.execute(select(uploads.c.id).where(
                uploads.c.blob_name == blob_name, uploads.c.state == UploadState.OPEN.value,
                uploads.c.expires_at > NOW), self.times())).first()
        return found is not None

    async def staged_handles(self, names: Sequence[str]) -> dict[str, str]:
        """Which of these blobs belong to resumable uploads: name -> the store's handle."""
        async with self.db.transaction(readonly=True) as conn:
            rows = (await conn.execute(select(uploads.c.blob_name, uploads.c.handle).where(
                uploads.c.blob_name.in_(names)))).all()
        return {r.blob_name: r.handle for r in rows}

