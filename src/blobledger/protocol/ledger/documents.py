"""The ledger's writer of documents: create (C1-C4, a name known only after the bytes, an
idempotency key's retry), replace (R1-R4) and delete."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import NoReturn

from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger import failpoints, telemetry
from blobledger._base import metrics
from blobledger._base.names import (
    check_content_type,
    check_document_name,
    new_blob_name,
    new_document_id,
)
from blobledger.config import held_by_settings
from blobledger.db import once_more_if_lost
from blobledger.errors import (
    Digests,
    IdempotencyConflict,
    IdempotencyInProgress,
    IntentLost,
    InvalidInput,
    InvalidName,
    NotFound,
    PreconditionFailed,
)
from blobledger.protocol.buckets import Admitted
from blobledger.protocol.documents import Data, Document, known_size
from blobledger.protocol.ledger.reads import Reads
from blobledger.protocol.ledger.steps import LOST, _deadline, _step
from blobledger.protocol.models import DEFAULT_BUCKET, BlobKind, KeyState
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import PLACEHOLDER, new_token

_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")

#: a name known only after the bytes have streamed (see ``Ledger.create``)
NameSource = Callable[[], Awaitable[str]]
#: run once the intent's rows exist (C1/R1), before its bytes are sent (see ``Ledger.create``)
OnIntent = Callable[[Intent], Awaitable[None]]


class DocumentWriter(Reads):
    """Create, replace and delete: a document's writer, one intent at a time."""

    # -- create ---------------------------------------------------------------------------
    async def create(
        self,
        name: str | None,
        data: Data,
        *,
        content_type: str | None = None,
        idempotency_key: str | None = None,
        sha256: str | None = None,
        md5: str | None = None,
        name_after_upload: NameSource | None = None,
        hold: bool = False,
        owner: str | None = None,
        on_intent: OnIntent | None = None,
        bucket: str = DEFAULT_BUCKET,
    ) -> Document:
        """Create a document in ``bucket``; it becomes visible only once its bytes are
        committed (the span ``create``, parent of the steps' spans). The bucket's settings
        apply (:meth:`~blobledger.protocol.buckets.Buckets.admit`): its media types, its
        largest object and its quota, and its hold (a bucket that holds its creations holds
        this one).

        ``hold`` (or the settings' hold policy for the name): with processors configured,
        the document is returned ``held``, committed and stored but invisible to readers
        until every processor has accepted it (docs/pipeline.md); :meth:`hold_state` tells
        its state. ``owner`` names its writer (the service passes a digest of the token).

        ``name=None`` with ``name_after_upload``: the name is known only once the bytes have
        streamed (a form whose ``name`` field follows its file). The intent is then recorded
        under a placeholder no real name can equal and renamed in the confirm step before
        C3, so a name that is taken fails after the upload (its pending blob compensated)
        instead of before it.

        Under an ``idempotency_key``, a retry within the retention gets the first response
        again (the same id, version and checksum), resumes the intent of an attempt that
        died, or is told that the first attempt is still running.

        ``on_intent`` runs once the intent's rows exist, before the bytes are sent (what a
        caller records beside the blob, keyed by its name: the S3 endpoint's user metadata);
        its failure fails the creation like a failed upload.
        """
        if name is None and name_after_upload is None:
            raise InvalidName("a document needs a name")
        if name is not None:
            name = check_document_name(name)
        content_type = check_content_type(content_type)
        if idempotency_key is not None and not _KEY.match(idempotency_key):
            raise InvalidInput("idempotency key must be 1-255 visible ASCII characters")
        admitted = await self.buckets.admit(bucket, content_type, known_size(data),
                                            self.settings.max_upload_bytes)
        hold = hold or admitted.bucket.hold
        data = admitted.limit(data)
        with telemetry.span("create") as span:
            doc = await self._create(name, data, content_type, idempotency_key, sha256, md5,
                                     name_after_upload, hold, owner, on_intent, bucket,
                                     admitted.cap)
            span.set("document_id", doc.id)
            span.set("blob_name", doc.blob)
            return doc

    async def _create(
        self, name: str | None, data: Data, content_type: str, idempotency_key: str | None,
        sha256: str | None, md5: str | None, name_after_upload: NameSource | None,
        hold: bool = False, owner: str | None = None, on_intent: OnIntent | None = None,
        bucket: str = DEFAULT_BUCKET, cap: int | None = None,
    ) -> Document:
        rename = name_after_upload if name is None else None
        intent: Intent | None = None
        if idempotency_key is not None:
            found = await self._by_key(idempotency_key, name, content_type, data, rename)
            if isinstance(found, Document):
                return _in_bucket(found, bucket)
            intent = found
        resumed = intent is not None
        if intent is None:
            try:
                intent = await self.begin_create(name, content_type, idempotency_key,
                                                 hold=hold, owner=owner, bucket=bucket,
                                                 cap=cap)
            except DBIntegrityError:  # the key was reserved meanwhile: look again
                assert idempotency_key is not None
                found = await self._by_key(idempotency_key, name, content_type, data, rename)
                if isinstance(found, Document):
                    return _in_bucket(found, bucket)
                if found is None:
                    raise IdempotencyInProgress(
                        "an attempt with this idempotency key is running") from None
                intent, resumed = found, True
        if intent.placeholder is not None and name is not None:
            rename = _known(name)  # a retry that knows the name its dead attempt did not
        return await self._finish_create(intent, data, sha256, md5, resumed=resumed,
                                         rename=rename, on_intent=on_intent)

    async def begin_create(
        self, name: str | None, content_type: str, idempotency_key: str | None = None, *,
        hold: bool = False, owner: str | None = None, bucket: str = DEFAULT_BUCKET,
        cap: int | None = None,
    ) -> Intent:
        """C1: the pending document and blob row, this attempt's, in ``bucket``; NameTaken
        if the name is taken there (``None``: recorded under a placeholder until
        :meth:`confirm` names it)."""
        doc_id = new_document_id()
        placeholder = PLACEHOLDER + doc_id if name is None else None
        intent = Intent(
            blob_name=new_blob_name(self.settings.blob_prefix, name or ""),
            document_id=doc_id, kind=BlobKind.CREATE, attempt=new_token(),
            content_type=content_type, placeholder=placeholder,
            deadline=_deadline(self.settings.upload_deadline), hold=hold, owner=owner,
            keyed=idempotency_key is not None, name=name, bucket=bucket, cap=cap)

        def c1() -> Awaitable[None]:
            return self.transitions.begin_create(intent, placeholder or name or "",
                                                 idempotency_key)

        with _step("begin_create", intent):
            await self.inserted(intent, c1(), again=c1 if self.transitions.c1_in_one(
                idempotency_key) else None)
        await failpoints.hit("create.after_insert")
        return intent

    async def _finish_create(
        self, intent: Intent, data: Data, sha256: str | None, md5: str | None, *,
        resumed: bool, rename: NameSource | None = None, on_intent: OnIntent | None = None,
    ) -> Document:
        deferred = self.transitions.deferred
        try:
            if on_intent is not None:
                await on_intent(intent)
            with _step("upload", intent):
                digests = await self.upload(intent, data, sha256, md5, resumed=resumed)  # C2
            await failpoints.hit("create.after_upload")
            if not deferred or rename is not None:  # deferred: confirm folds into C4
                with _step("confirm", intent):
                    await self.confirm(intent,
                                       check_document_name(await rename()) if rename else None)
                await failpoints.hit("create.after_confirm")
            if not deferred:  # deferred: C3 is the retag worker's, after C4
                with _step("tag_committed", intent):
                    await self.tag_committed(intent)  # C3
                await failpoints.hit("create.after_tag")
        except BaseException as exc:
            await self._fail(intent, exc)
            raise
        with _step("commit_create", intent):
            doc = await self.commit_create(intent, digests)  # C4
        await failpoints.hit("create.after_commit")
        return doc

    async def commit_create(self, intent: Intent, digests: Digests,
                            upload_id: str | None = None) -> Document:
        """C4: the document ready, as written (with ``upload_id``, that upload done in the
        same transaction); if the sweeper rolled this creation forward meanwhile (the writer
        was paused after C3), the document it made ready. A connection lost under C4 (its
        COMMIT may have applied) is tried once more: the second run loses if the first
        applied, and the ready document is then this attempt's own."""
        doc, _ = await once_more_if_lost(
            lambda: self.transitions.commit_create(intent, digests, upload_id))
        if doc is None:  # also when the lost first run applied: the document is this one
            doc = await self.transitions.settled_create(intent)
        if doc is None:
            await self._c4_lost(intent)
        metrics.DOCUMENTS_CREATED.inc()
        self._owed()
        return doc

    def _owed(self) -> None:
        """After a C4/R4 that left the retag owed (deferred): wake this process's worker."""
        if self.transitions.deferred:
            self.retag_owed.set()

    async def _c4_lost(self, intent: Intent) -> NoReturn:
        """C4/R4 lost: IntentLost. Deferred, no confirm ran before it, so the writer may have
        been paused inside its upload while the sweeper removed the intent: its blob is
        deleted if the row is gone (conditioned on ``pending``), as a lost confirm does."""
        if self.transitions.deferred:
            await self.drop_lost(intent)
        raise IntentLost(LOST)

    async def _by_key(
        self, key: str, name: str | None, content_type: str, data: Data,
        rename: NameSource | None,
    ) -> Document | Intent | None:
        """What an earlier attempt under ``key`` left: its first response, an intent this
        attempt has now taken over, or nothing."""
        record = await self.transitions.find_key(key)
        if record is None:
            return None
        if name is not None and record.name is not None and record.name != name:
            raise IdempotencyConflict("idempotency key was used for a different name")
        if record.content_type != content_type:
            raise IdempotencyConflict("idempotency key was used with a different content type")
        if record.state == KeyState.PENDING:
            await failpoints.hit("create.before_take_over")
            intent = await self.transitions.take_over(record)
            if intent is None:
                raise IdempotencyInProgress("an attempt with this idempotency key is running")
            intent.deadline = _deadline(self.settings.upload_deadline)
            return intent
        digests = await self._digest(data)
        if digests.sha256 != record.sha256:
            raise IdempotencyConflict("idempotency key was used with different bytes")
        if record.response is None:  # kept by the upgrade from 0002 for a deleted document
            raise IdempotencyConflict("the document created with this key has been deleted")
        if rename is not None and check_document_name(await rename()) != record.name:
            raise IdempotencyConflict("idempotency key was used for a different name")
        return record.response

    # -- replace --------------------------------------------------------------------------
    async def replace(
        self,
        doc_id: str,
        data: Data,
        *,
        expected_version: int,
        content_type: str | None = None,
        sha256: str | None = None,
        md5: str | None = None,
        on_intent: OnIntent | None = None,
    ) -> Document:
        """Point the document at new bytes if its version is still ``expected_version``;
        returns the document as this replace wrote it (the span ``replace``, parent of the
        steps' spans). ``on_intent``: as :meth:`create`'s, after R1."""
        with telemetry.span("replace", document_id=doc_id) as span:
            intent, admitted = await self._begin_replace(doc_id, expected_version,
                                                         content_type, known_size(data))
            data = admitted.limit(data)
            span.set("blob_name", intent.blob_name)
            try:
                if on_intent is not None:
                    await on_intent(intent)
                with _step("upload", intent):
                    digests = await self.upload(intent, data, sha256, md5)  # R2
                await failpoints.hit("replace.after_upload")
                if not self.transitions.deferred:  # deferred: confirm folds into R4, R3 later
                    with _step("confirm", intent):
                        await self.confirm(intent)
                    await failpoints.hit("replace.after_confirm")
                    with _step("tag_committed", intent):
                        await self.tag_committed(intent)  # R3
                    await failpoints.hit("replace.after_tag")
            except BaseException as exc:
                await self._fail(intent, exc)
                raise
            with _step("commit_replace", intent):
                doc = await self.commit_replace(intent, digests)  # R4
            await failpoints.hit("replace.after_commit")
            return doc

    async def begin_replace(
        self, doc_id: str, expected_version: int, content_type: str | None = None
    ) -> Intent:
        """R1: a pending blob row for the document, this attempt's (PreconditionFailed early
        if the version already differs; the bucket's settings admit the write first)."""
        intent, _ = await self._begin_replace(doc_id, expected_version, content_type, None)
        return intent

    async def _begin_replace(
        self, doc_id: str, expected_version: int, content_type: str | None, size: int | None
    ) -> tuple[Intent, Admitted]:
        async with self.db.session(readonly=True) as session:
            doc = await self._ready_row(session, doc_id)
        if self.settings.processors and held_by_settings(self.settings, doc.name):
            raise InvalidInput(
                f"{doc.name!r} is held by the settings and a replace is never held: delete "
                "the document and create it again (docs/pipeline.md)")
        if doc.version != expected_version:
            raise PreconditionFailed(
                f"document is at version {doc.version}, not {expected_version}",
                current_version=doc.version)
        content_type = check_content_type(content_type or doc.content_type)
        admitted = await self.buckets.admit(doc.bucket, content_type, size,
                                            self.settings.max_upload_bytes,
                                            replacing=doc.size or 0)
        intent = Intent(
            blob_name=new_blob_name(self.settings.blob_prefix, doc.name), document_id=doc_id,
            kind=BlobKind.REPLACE, attempt=new_token(),
            content_type=content_type, cap=admitted.cap,
            expected_version=expected_version, old_blob=doc.blob_name,
            deadline=_deadline(self.settings.upload_deadline))
        with _step("begin_replace", intent):
            await self.inserted(intent, self.transitions.begin_replace(intent))
        await failpoints.hit("replace.after_insert")
        return intent, admitted

    async def commit_replace(self, intent: Intent, digests: Digests) -> Document:
        """R4: the document as this replace wrote it, or why not. A connection lost under R4
        (its COMMIT may have applied) is tried once more: the second run loses if the first
        applied, and the document then points at this intent's blob, one version on."""
        outcome, again = await once_more_if_lost(
            lambda: self.transitions.commit_replace(intent, digests))
        if outcome.lost:
            if again and (doc := await self._replaced(intent)) is not None:
                self._owed()
                return doc
            await self._c4_lost(intent)
        if outcome.document is None:
            if outcome.current_version is None:
                raise NotFound(f"no document {intent.document_id!r}")
            raise PreconditionFailed(
                f"document is at version {outcome.current_version}, "
                f"not {intent.expected_version}", current_version=outcome.current_version)
        self._owed()
        return outcome.document

    async def _replaced(self, intent: Intent) -> Document | None:
        """After R4's second run lost: the document, if the lost first run applied (it
        points at this intent's blob at the version after the expected one)."""
        assert intent.expected_version is not None
        try:
            doc = await self.get(intent.document_id)
        except NotFound:
            return None
        if doc.blob == intent.blob_name and doc.version == intent.expected_version + 1:
            return doc
        return None

    # -- delete ---------------------------------------------------------------------------
    async def delete(self, doc_id: str, *, expected_version: int | None = None) -> None:
        """Remove the document now; its blob goes to the deletion path. A connection lost
        under the delete (its COMMIT may have applied) is tried once more; if that finds
        the document gone, it is deleted (by the first run, or by another delete)."""
        doc = await self.get(doc_id)
        if expected_version is not None and doc.version != expected_version:
            raise PreconditionFailed(
                f"document is at version {doc.version}, not {expected_version}",
                current_version=doc.version)
        deleted, again = await once_more_if_lost(
            lambda: self.transitions.delete_document(doc_id, doc.version))
        if not deleted and not (again and await self._gone(doc_id)):
            raise PreconditionFailed("document changed while it was being deleted")
        await failpoints.hit("delete.after_commit")

    async def _gone(self, doc_id: str) -> bool:
        try:
            await self.get(doc_id)
        except NotFound:
            return True
        return False



def _in_bucket(doc: Document, bucket: str) -> Document:
    """An idempotency key's first response, for a retry in the same bucket only."""
    if doc.bucket != bucket:
        raise IdempotencyConflict("idempotency key was used in a different bucket")
    return doc


def _known(name: str) -> NameSource:
    async def source() -> str:
        return name

    return source


