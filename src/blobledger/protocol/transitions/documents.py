"""The writers' steps on documents (``Ledger``): idempotency keys, C1 and a retry's
takeover, the confirm before C3/R3, C4, R1 and R4, delete, and a live writer's failure
path (its intent to the deletion path)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from sqlalchemy import Row, delete, select, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger.config import held_by_settings
from blobledger.errors import Digests, NameTaken
from blobledger.protocol import events, single
from blobledger.protocol.documents import Document
from blobledger.protocol.group import Group
from blobledger.protocol.models import BlobKind, DocumentStatus, EventType, KeyState, WorkState
from blobledger.protocol.transitions.base import Steps
from blobledger.protocol.transitions.records import Intent, KeyRecord, ReplaceOutcome
from blobledger.protocol.transitions.statements import (
    COMMITTED,
    DELETING,
    NOW,
    PENDING,
    PLACEHOLDER,
    _abandon,
    _c1_one,
    _c4_one,
    _commit_blob,
    _commit_blob_owed,
    _commit_claimed,
    _confirm,
    _count,
    _drop_abandoned,
    _drop_expired_key,
    _drop_pending_document,
    _drop_pending_key,
    _drop_unverified_upload,
    _finish_upload,
    _give_up,
    _insert_blob,
    _insert_document,
    _insert_key,
    _key_done,
    _mine,
    _names_key,
    _point_document,
    _ready_document,
    _refused_c1,
    _rename,
    _take_over,
    _to_deleting,
    _Undo,
    blobs,
    documents,
    keys,
    new_token,
    processing,
    readable,
    uploads,
)
from blobledger.protocol.variant_owner import detach_variants


class DocumentSteps(Steps):
    """C1, confirm, C4, R1, R4, delete and abandon: a writer's compare-and-sets."""

    # -- idempotency keys -----------------------------------------------------------------
    async def find_key(self, key: str) -> KeyRecord | None:
        """The key's record; a finished one past its retention counts as absent."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(
                select(keys, (keys.c.expires_at > NOW).label("live"))
                .where(keys.c.key == key), self.times())).one_or_none()
        if row is None or (row.state == KeyState.DONE and not row.live):
            return None
        response = None
        if row.response is not None:
            response = Document.from_json(json.loads(row.response))
        return KeyRecord(row.key, row.state, row.blob_name, row.document_id, row.name,
                         row.content_type, row.sha256, response)

    # -- C1 -------------------------------------------------------------------------------
    async def begin_create(self, intent: Intent, name: str, key: str | None) -> None:
        """C1: the pending document, its pending blob row (this attempt's, leased) and the
        idempotency key's reservation, in one transaction. NameTaken if the name is taken,
        BucketNotFound if the bucket was deleted since its lookup;
        the database's IntegrityError if the key is (the caller looks the key up again)."""
        times = self.times(lease=self.settings.upload_deadline)
        document = dict(id=intent.document_id, bucket=intent.bucket, name=name,
                        blob_name=intent.blob_name,
                        content_type=intent.content_type, **self._holding(intent, name))
        blob = dict(name=intent.blob_name, document_id=intent.document_id,
                    kind=intent.kind.value, content_type=intent.content_type,
                    attempt=intent.attempt)
        try:
            if self.c1_in_one(key):
                one = dict(single.c1_params(document, blob), **times)
                await self._c1s.run(one, lambda: self._c1_alone(one))
                return
            async with self.db.transaction() as conn:
                if key is not None:
                    await conn.execute(_drop_expired_key, {"k_key": key, **times})
                    await conn.execute(_insert_key, dict(
                        key=key, blob_name=intent.blob_name, document_id=intent.document_id,
                        name=None if intent.placeholder else name,
                        content_type=intent.content_type, **times))
                await conn.execute(_insert_document, dict(document, **times))
                await conn.execute(_insert_blob, dict(blob, **times))
        except DBIntegrityError as exc:
            if key is not None and _names_key(exc):
                raise
            raise _refused_c1(exc, intent.bucket, name) from None

    def c1_in_one(self, key: str | None) -> bool:
        """Whether C1 runs as one autocommit statement (:mod:`blobledger.protocol.single`):
        an unkeyed creation on PostgreSQL."""
        return key is None and self.db.single_statements

    async def take_over(self, record: KeyRecord) -> Intent | None:
        """A retry displaces the attempt that holds ``record``'s intent, if that attempt's
        lease expired more than the sweeper's margin ago; None if it is still owned."""
        async with self.db.transaction() as conn:
            row = (await conn.execute(
                select(blobs.c.attempt, blobs.c.content_type, documents.c.name)
                .join(documents, documents.c.id == blobs.c.document_id, isouter=True)
                .where(blobs.c.name == record.blob_name, blobs.c.state == PENDING)
            )).one_or_none()
            if row is None:
                return None
            attempt = new_token()
            won = await conn.execute(_take_over, dict(
                b_name=record.blob_name, b_seen=row.attempt, b_attempt=attempt,
                **self.times(lease=self.settings.upload_deadline,
                             cutoff=self.takeover_margin)))
            if _count(won) != 1:
                return None
        placeholder = row.name if row.name and row.name.startswith(PLACEHOLDER) else None
        return Intent(record.blob_name, record.document_id, BlobKind.CREATE, attempt,
                      row.content_type, placeholder=placeholder)

    # -- C3/R3 prelude --------------------------------------------------------------------
    async def confirm(self, intent: Intent, rename: str | None = None) -> bool:
        """The intent is still this attempt's: extend its lease (and give a creation recorded
        under a placeholder its real name: NameTaken if that is taken). False if lost."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt,
                      **self.times(lease=self.settings.upload_deadline))
        try:
            async with self.db.transaction() as conn:
                if _count(await conn.execute(_confirm, params)) != 1:
                    return False
                if rename is not None and intent.placeholder is not None:
                    await conn.execute(_rename, dict(
                        d_id=intent.document_id, d_placeholder=intent.placeholder,
                        d_name=rename, d_hold=held_by_settings(self.settings, rename)))
                    await conn.execute(update(keys).where(
                        keys.c.blob_name == intent.blob_name,
                        keys.c.state == KeyState.PENDING.value).values(name=rename))
        except DBIntegrityError:
            raise NameTaken(f"a document named {rename!r} already exists") from None
        if rename is not None:
            intent.placeholder, intent.name = None, rename
        return True

    async def owns(self, intent: Intent) -> bool:
        """Whether the intent is still this attempt's (pending, its token). Reads only: for
        a failure path that must tell a lost intent from a failed step."""
        async with self.db.transaction(readonly=True) as conn:
            found = (await conn.execute(select(blobs.c.name).where(*_mine), dict(
                b_name=intent.blob_name, b_attempt=intent.attempt))).first()
        return found is not None

    # -- C4 -------------------------------------------------------------------------------
    async def commit_create(self, intent: Intent, digests: Digests,
                            upload_id: str | None = None) -> Document | None:
        """C4 (after C3): blob row committed and document ready, only while the intent is
        this attempt's, or claimed by a sweeper that has not decided yet (the writer then
        makes the roll-forward that sweeper would make; a sweeper that fenced the row first
        wins); the key's first response recorded; with ``upload_id``, that upload done in the
        same transaction (no state between C4 and the upload's end). None if the intent was
        lost."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt, d_id=intent.document_id,
                      b_size=digests.size, b_sha256=digests.sha256, b_md5=digests.md5,
                      u_id=upload_id, **self._settle(),
                      **self.times(expires=self.settings.idempotency_retention))
        deferred = self.deferred
        if (deferred and not intent.keyed and upload_id is None and intent.name is not None
                and not self.settings.processors and self.db.single_statements):
            return await self._commit_create_in_one(intent, digests, params)
        async with self.db.transaction() as conn:
            if _count(await conn.execute(_commit_blob_owed if deferred else _commit_blob,
                                         params)) != 1 and (
                    deferred  # the blob is still tagged pending: the claim's delete decides
                    or intent.kind != BlobKind.CREATE
                    or _count(await conn.execute(_commit_claimed, params)) != 1):
                return None
            row = (await conn.execute(_ready_document, params)).one()
            await self._hold(conn, row)
            doc = Document.from_row(row)
            if doc.status == DocumentStatus.READY:  # a held one's is written at its acceptance
                await events.document_ready(conn, doc, md5=digests.md5, offset=self.offset)
            if intent.keyed:
                await conn.execute(_key_done, dict(
                    params, k_name=doc.name, k_response=json.dumps(doc.to_json())))
            if upload_id is not None:
                await conn.execute(_finish_upload, params)
        return doc

    async def _commit_create_in_one(self, intent: Intent, digests: Digests,
                                    params: dict[str, Any]) -> Document | None:
        """C4 as one statement (:func:`blobledger.protocol.single.c4_deferred`): the event's
        values are those :meth:`commit_create`'s transaction would write for the document
        this C4 makes ready (it cannot be held: no processor is configured)."""
        assert intent.name is not None
        event = events.document_values(
            EventType.READY, intent.document_id, intent.name, 1, digests.size,
            intent.content_type, digests.sha256, intent.blob_name, digests.md5,
            bucket=intent.bucket)
        one = dict(params, **single.c4_event_params(event))
        row = await self._c4s.run(one, lambda: self._c4_alone(one))
        return None if row is None else Document.from_row(row)

    # -- C1 and C4 in one statement each, grouped (protocol/group.py) ---------------------
    @cached_property
    def _c1s(self) -> Group[dict[str, Any], None]:
        """Concurrent one-statement C1s: the ones queued behind a C1 in flight sent
        together, one round trip and one commit (all their rows or none)."""
        return Group(self._c1_many)

    @cached_property
    def _c4s(self) -> Group[dict[str, Any], Any]:
        """Concurrent one-statement C4s, likewise: each run's own compare-and-set decides
        its own row (returned, or none if it lost)."""
        return Group(self._c4_many)

    async def _c1_alone(self, one: dict[str, Any]) -> None:
        await self.db.fetch_one(_c1_one, one)

    async def _c1_many(self, runs: Sequence[dict[str, Any]]) -> list[None]:
        await self.db.fetch_each(_c1_one, runs)  # the driver's pipelined runs: no rows
        return [None] * len(runs)

    async def _c4_alone(self, one: dict[str, Any]) -> Any:
        return await self.db.fetch_one(_c4_one, one)

    async def _c4_many(self, runs: Sequence[dict[str, Any]]) -> list[Any]:
        rows = {row.id: row for row in await self.db.fetch_each(_c4_one, runs)}
        return [rows.get(one["d_id"]) for one in runs]  # a run's row: its own document's

    async def settled_create(self, intent: Intent) -> Document | None:
        """After a lost C4: the document if the sweeper rolled this creation forward (ready,
        or held: a held creation's roll-forward makes it held, as C4 would)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(documents).where(
                documents.c.id == intent.document_id))).one_or_none()
        if (row is None or row.status not in (DocumentStatus.READY, DocumentStatus.HELD)
                or row.blob_name != intent.blob_name or row.version != 1):
            return None
        return Document.from_row(row)

    # -- R1, R4 ---------------------------------------------------------------------------
    async def begin_replace(self, intent: Intent) -> None:
        """R1: the replacement's pending blob row, this attempt's and leased."""
        async with self.db.transaction() as conn:
            await conn.execute(_insert_blob, dict(
                name=intent.blob_name, document_id=intent.document_id,
                kind=intent.kind.value, content_type=intent.content_type,
                attempt=intent.attempt, **self.times(lease=self.settings.upload_deadline)))

    async def commit_replace(self, intent: Intent, digests: Digests) -> ReplaceOutcome:
        """R4: the document points at the new blob and its version +1 only if the version
        still matches and the intent is still this attempt's; the old blob to the deletion
        path. A document that moved on sends the new blob to the deletion path instead."""
        assert intent.expected_version is not None
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt, d_id=intent.document_id,
                      d_version=intent.expected_version, d_content_type=intent.content_type,
                      b_size=digests.size, b_sha256=digests.sha256, b_md5=digests.md5,
                      **self.times())
        async with self.db.transaction() as conn:
            if _count(await conn.execute(_commit_blob_owed if self.deferred else _commit_blob,
                                         params)) != 1:
                return ReplaceOutcome(lost=True)
            row = (await conn.execute(_point_document, params)).one_or_none()
            if row is None:
                await conn.execute(_to_deleting, params)
                current = (await conn.execute(select(documents.c.version).where(
                    documents.c.id == intent.document_id,
                    documents.c.status == DocumentStatus.READY.value))).scalar_one_or_none()
                return ReplaceOutcome(current_version=current)
            await conn.execute(_to_deleting, dict(params, b_name=intent.old_blob))
            await detach_variants(conn, intent.document_id, intent.expected_version, params)
            doc = Document.from_row(row)
            await events.write(conn, [events.document_row(
                EventType.REPLACED, doc, digests.md5, previous_blob=intent.old_blob)],
                self.offset)
        return ReplaceOutcome(document=doc)

    # -- delete ---------------------------------------------------------------------------
    async def delete_document(self, doc_id: str, version: int) -> bool:
        """Remove a ready document at ``version``; its blob to the deletion path, and
        ``document.deleted`` written with it."""
        async with self.db.transaction() as conn:
            row = (await conn.execute(
                delete(documents)
                .where(documents.c.id == doc_id, documents.c.version == version,
                       documents.c.status == DocumentStatus.READY.value)
                .returning(*documents.c))).one_or_none()
            if row is None:
                return False
            await conn.execute(_to_deleting, dict(b_name=row.blob_name, **self.times()))
            await detach_variants(conn, doc_id, version, self.times())
            await events.write(conn, [events.document_row(
                EventType.DELETED, Document.from_row(row), row.md5)], self.offset)
        return True

    # -- a live writer's failure path -----------------------------------------------------
    async def abandon(self, intent: Intent, upload_id: str | None = None) -> bool:
        """The intent, while still this attempt's, to the deletion path (a creation's pending
        document and key go with it). False if someone else owns it now. With ``upload_id``
        (an upload given up), only while that upload is still open and unverified: a
        completion that recorded the verified SHA-256 first wins, in the same transaction
        (the upload's row is re-checked under its lock, so a concurrent ``record_verified``
        is either seen or refused)."""
        params = dict(b_name=intent.blob_name, b_attempt=intent.attempt,
                      d_id=intent.document_id, u_id=upload_id, **self.times())
        try:
            async with self.db.transaction() as conn:
                fenced = _abandon if upload_id is None else _give_up
                if _count(await conn.execute(fenced, params)) != 1:
                    return False
                if upload_id is not None and \
                        _count(await conn.execute(_drop_unverified_upload, params)) != 1:
                    raise _Undo  # verified meanwhile: nothing of this transaction stays
                if intent.kind == BlobKind.CREATE:
                    await conn.execute(_drop_pending_document, params)
                    await conn.execute(_drop_pending_key, params)
                await conn.execute(delete(uploads).where(
                    uploads.c.blob_name == intent.blob_name))
        except _Undo:
            return False
        return True

    async def remove_abandoned(self, blob_name: str) -> bool:
        """An abandoned intent whose blob is gone: its row, unless a sweeper claimed it."""
        async with self.db.transaction() as conn:
            return _count(await conn.execute(_drop_abandoned, {"b_name": blob_name})) == 1


    async def pointed_blob(self, doc_id: str, blob_name: str) -> tuple[Row[Any] | None,
                                                                         str | None]:
        """The row of ``blob_name`` if it holds bytes ``doc_id`` showed its readers, and the
        document's name if it is still there: its bytes (``committed``) or bytes it left
        (``deleting``: replaced, deleted) that the deletion path has not removed, while the
        document is ready (:func:`readable`) or gone, and was never rejected. So a held
        document's blob, and a rejected one's, is never one (an attachment's row names no
        document)."""
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(blobs).where(
                blobs.c.name == blob_name, blobs.c.document_id == doc_id,
                blobs.c.state.in_((COMMITTED, DELETING))))).one_or_none()
            doc = (await conn.execute(select(documents.c.name, documents.c.status).where(
                documents.c.id == doc_id))).one_or_none()
            rejected = (await conn.execute(select(processing.c.document_id).where(
                processing.c.document_id == doc_id,
                processing.c.state == WorkState.REJECTED.value).limit(1))).first()
        name = doc.name if doc is not None else None
        if row is None or rejected is not None or (doc is not None
                                                   and not readable(doc.status)):
            return None, name
        return row, name

