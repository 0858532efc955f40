"""The ledger's writer of attachments: stage (A1-A3, a blob owned by nobody until an
application's transaction attaches it, A4), a staged upload's outcome, an attachment's
bytes."""

from __future__ import annotations

from collections.abc import AsyncIterator

from blobledger import failpoints
from blobledger._base.names import (
    check_blob_name,
    check_content_type,
    check_document_name,
    new_blob_name,
)
from blobledger.db import once_more_if_lost
from blobledger.errors import Digests, InvalidInput, NotFound, OffsetMismatch, UploadGone
from blobledger.protocol.attachments import Attachment, StagedBlob, StagedUpload
from blobledger.protocol.documents import Data
from blobledger.protocol.ledger.steps import Steps, _deadline, _plausible_id
from blobledger.protocol.models import BlobKind, BlobState, UploadState
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import new_token
from blobledger.stores.base import BlobReader


class AttachmentWriter(Steps):
    """Stage: A1, A2, confirm (recording the digests), A3."""

    # -- attachments: A1-A3 ----------------------------------------------------------------
    async def stage(
        self,
        data: Data,
        *,
        content_type: str | None = None,
        filename: str | None = None,
        sha256: str | None = None,
        md5: str | None = None,
        folder: str | None = None,
    ) -> StagedBlob:
        """A1 (a pending row, owned by no document), A2 (create-only upload, tagged pending),
        confirm (still this attempt's; digests recorded), A3 (tagged committed). The staged
        blob belongs to nobody until an application's transaction attaches it (A4,
        :mod:`blobledger.sqlalchemy`); never attached, the sweeper fences and deletes it.
        ``folder`` (segments such as ``invoices/2026``) goes between the blob prefix and
        the generated part of the blob's name."""
        intent, filename = self.staging_intent(content_type, filename, folder)
        content_type = intent.content_type
        await self.inserted(intent, self.transitions.begin_stage(intent, filename))  # A1
        await failpoints.hit("stage.after_insert")
        try:
            digests = await self.upload(intent, data, sha256, md5)  # A2
            await failpoints.hit("stage.after_upload")
            await self.confirm_staged(intent, digests)
            await failpoints.hit("stage.after_confirm")
            await self.tag_committed(intent)  # A3
            await failpoints.hit("stage.after_tag")
        except BaseException as exc:
            await self._fail(intent, exc)
            raise
        return StagedBlob(name=intent.blob_name, size=digests.size, sha256=digests.sha256,
                          md5=digests.md5, content_type=content_type, filename=filename,
                          attempt=intent.attempt)

    def staging_intent(self, content_type: str | None, filename: str | None,
                       folder: str | None) -> tuple[Intent, str | None]:
        """A staging's intent (a new blob name under the prefix and ``folder``, a new token,
        the deadline from now; call inside the loop that uploads) and the checked filename."""
        content_type = check_content_type(content_type)
        if filename is not None:
            filename = check_document_name(filename)
        prefix = self.settings.blob_prefix + (f"/{folder}" if folder else "")
        return Intent(
            blob_name=check_blob_name(new_blob_name(prefix, filename or "")),
            document_id="", kind=BlobKind.ATTACHMENT, attempt=new_token(),
            content_type=content_type,
            deadline=_deadline(self.settings.upload_deadline)), filename

    async def confirm_staged(self, intent: Intent, digests: Digests) -> None:
        """Before A3: compare-and-set that the staged intent is still this attempt's (its
        lease extended, its digests recorded); if not, as :meth:`confirm`: IntentLost. Tried
        once more on a lost connection, as :meth:`confirm`."""
        confirmed, _ = await once_more_if_lost(
            lambda: self.transitions.confirm_staged(intent, digests))
        if not confirmed:
            await self._lost(intent)

    async def staged_upload(self, upload_id: str) -> StagedUpload:
        """The staged blob a client's completed attachment upload (direct or tus) left, to
        assign to an attachment attribute (A4 in the application's flush), with the
        ``target`` the client declared. The staging token comes from the blob's row; the
        client never sees it. UploadGone (a NotFound) if the upload is unknown, cancelled,
        swept, or its blob already attached; InvalidInput if it made a document;
        OffsetMismatch if it is not complete."""
        upload = await self.transitions.find_upload(upload_id) \
            if isinstance(upload_id, str) and _plausible_id(upload_id) else None
        if upload is None:
            raise UploadGone(f"no upload {upload_id!r}")
        if not upload.attachment:
            raise InvalidInput(f"upload {upload_id!r} makes a document, not an attachment")
        if upload.state != UploadState.DONE:
            raise OffsetMismatch(f"upload {upload_id!r} is not complete", upload.offset)
        row = await self.transitions.staged_blob(upload.blob_name)
        if row is None or row.state != BlobState.PENDING or row.attempt != upload.attempt \
                or row.size is None or row.sha256 is None or row.md5 is None:
            why = "is attached already" if row is not None and \
                row.state == BlobState.ATTACHED else "was swept"
            raise UploadGone(f"the blob of upload {upload_id!r} {why}")
        return StagedUpload(name=row.name, size=row.size, sha256=row.sha256, md5=row.md5,
                            content_type=row.content_type, filename=row.filename,
                            attempt=row.attempt, upload_id=upload.id,
                            target=upload.meta.get("target"))

    async def attachment(self, blob_name: str) -> Attachment:
        """An attached blob's metadata, from its row; NotFound unless it is attached."""
        row = await self.transitions.attachment(blob_name)
        if row is None or row.sha256 is None or row.md5 is None or row.size is None:
            raise NotFound(f"no attachment {blob_name!r}")
        return Attachment(row.name, row.size, row.sha256, row.md5, row.content_type,
                          row.filename)

    async def open_attachment(
        self, attachment: Attachment | str, start: int = 0, length: int | None = None
    ) -> tuple[Attachment, BlobReader]:
        """An attached blob's metadata and an open ranged read of its bytes (NotFound if it
        is not attached: staged, detached or deleted)."""
        name = attachment if isinstance(attachment, str) else attachment.name
        found = await self.attachment(name)
        return found, await self.store.open(name, start, length)

    async def read_attachment(
        self, attachment: Attachment | str, start: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes]:
        """The bytes of an attached blob, streamed."""
        _, reader = await self.open_attachment(attachment, start, length)
        try:
            async for chunk in reader:
                yield chunk
        finally:
            await reader.aclose()

