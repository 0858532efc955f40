"""The ledger: create, replace, delete and read on the protocol (docs/protocol.md).

Create is C1 (rows, pending), C2 (create-only upload, tagged pending), C3 (tag committed),
C4 (rows committed/ready). Replace is R1 to R4; R5 is the deletion path's work. Delete is one
transaction that hands the blob to the deletion path. No database connection is held while
bytes stream. A compensating delete runs only on the failure path of a live process: it is
an optimisation, the sweeper is the correctness argument. This module never deletes a blob
that is not tagged ``pending``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from blobledger import failpoints, statements
from blobledger.config import Settings
from blobledger.config import from_env as settings_from_env
from blobledger.db import Database
from blobledger.documents import Data, Document, as_stream, limit_size
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    Digests,
    IdempotencyConflict,
    IdempotencyInProgress,
    InvalidName,
    NameTaken,
    NotFound,
    PreconditionFailed,
    StoreError,
    UploadAborted,
)
from blobledger.models import (
    COMMITTED_TAG as COMMITTED,
)
from blobledger.models import (
    PENDING_TAG as PENDING,
)
from blobledger.models import (
    STATE_TAG,
    BlobKind,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    utcnow,
)
from blobledger.names import (
    check_content_type,
    check_document_name,
    new_blob_name,
    new_document_id,
)
from blobledger.stores import Store, open_store
from blobledger.stores.base import BlobReader, Hasher, verify

log = logging.getLogger("blobledger.ledger")

_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
PAGE = 500

Clock = Callable[[], datetime]
#: a name known only after the bytes have streamed (see ``Ledger.create``)
NameSource = Callable[[], Awaitable[str]]
#: the name of a pending document whose real name is not known yet: control characters are
#: never part of a real name (``names.check_document_name``), so it cannot collide
PLACEHOLDER = "\x01unnamed:"
CLOCK_OFFSET_ENV = "BLOBLEDGER_CLOCK_OFFSET"


def _offset_clock(text: str) -> Clock:
    try:
        offset = timedelta(seconds=float(text))
    except ValueError:
        raise ConfigError(f"{CLOCK_OFFSET_ENV} must be a number of seconds, not {text!r}") \
            from None

    def clock() -> datetime:
        return utcnow() + offset

    return clock


class Ledger:
    """Documents whose bytes live in a store and whose truth lives in a database."""

    def __init__(
        self,
        db: Database,
        store: Store,
        settings: Settings | None = None,
        *,
        clock: Clock = utcnow,
        migrate: bool = True,
    ) -> None:
        self.db = db
        self.store = store
        self.settings = settings or Settings()
        self.clock = clock
        self._migrate = migrate

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_urls(
        cls,
        database_url: str,
        store_url: str,
        *,
        settings: Settings | None = None,
        clock: Clock = utcnow,
        migrate: bool = True,
    ) -> Ledger:
        settings = (settings or settings_from_env()).with_(
            database_url=database_url, store_url=store_url
        )
        return cls(Database(database_url), open_store(store_url, settings), settings,
                   clock=clock, migrate=migrate)

    @classmethod
    def from_env(cls, *, clock: Clock = utcnow, migrate: bool = True) -> Ledger:
        """A ledger configured by ``BLOBLEDGER_*``; ``BLOBLEDGER_CLOCK_OFFSET`` (seconds, for
        tests: a process that lives hours ahead) shifts the default clock."""
        settings = settings_from_env()
        if clock is utcnow and os.environ.get(CLOCK_OFFSET_ENV, "").strip():
            clock = _offset_clock(os.environ[CLOCK_OFFSET_ENV])
        return cls(Database(settings.database_url), open_store(settings.store_url, settings),
                   settings, clock=clock, migrate=migrate)

    async def connect(self) -> Ledger:
        """Reach the database (migrating it unless told not to) and prepare the store."""
        if self._migrate:
            await self.db.migrate()
        else:
            await self.db.ping()
        await self.store.prepare()
        return self

    async def close(self) -> None:
        await self.store.close()
        await self.db.dispose()

    async def __aenter__(self) -> Ledger:
        try:
            return await self.connect()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

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
    ) -> Document:
        """Create a document; it becomes visible only once its bytes are committed.

        ``name=None`` with ``name_after_upload``: the name is known only once the bytes have
        streamed (a form whose ``name`` field follows its file). The intent is then recorded
        under a placeholder no real name can equal and renamed before C3, so a name that is
        taken fails after the upload (its pending blob compensated) instead of before it.
        """
        if name is None and name_after_upload is None:
            raise InvalidName("a document needs a name")
        if name is not None:
            name = check_document_name(name)
        content_type = check_content_type(content_type)
        if idempotency_key is not None and not _KEY.match(idempotency_key):
            raise InvalidName("idempotency key must be 1-255 visible ASCII characters")
        rename = name_after_upload if name is None else None
        if idempotency_key is not None:
            found = await self._existing_intent(idempotency_key, name, data, rename)
            if isinstance(found, Document):
                return found
            if found is not None:
                return await self._finish_create(found, data, sha256, md5, resumed=True,
                                                 rename=rename)
        now = self.clock()
        doc_id = new_document_id()
        blob_name = new_blob_name(self.settings.blob_prefix, name or "")
        lease = now + timedelta(seconds=self.settings.upload_deadline)
        try:
            async with self.db.transaction() as conn:  # C1
                await conn.execute(statements.insert_document, dict(
                    id=doc_id, name=name if name is not None else PLACEHOLDER + doc_id,
                    status=DocumentStatus.PENDING.value,
                    blob_name=blob_name, version=1, size=None, content_type=content_type,
                    sha256=None, md5=None, created_at=now, updated_at=now))
                await conn.execute(statements.insert_blob, dict(
                    name=blob_name, document_id=doc_id, kind=BlobKind.CREATE.value,
                    state=BlobState.PENDING.value, content_type=content_type, size=None,
                    sha256=None, md5=None, idempotency_key=idempotency_key,
                    lease_until=lease, created_at=now, changed_at=now))
        except DBIntegrityError:
            if idempotency_key is not None:
                found = await self._existing_intent(idempotency_key, name, data, rename)
                if isinstance(found, Document):
                    return found
                if found is not None:
                    return await self._finish_create(found, data, sha256, md5, resumed=True,
                                                     rename=rename)
            raise NameTaken(f"a document named {name!r} already exists") from None
        await failpoints.hit("create.after_insert")
        row = BlobRow(name=blob_name, document_id=doc_id, content_type=content_type,
                      lease_until=lease)
        return await self._finish_create(row, data, sha256, md5, resumed=False, rename=rename)

    async def _finish_create(
        self, row: BlobRow, data: Data, sha256: str | None, md5: str | None, *, resumed: bool,
        rename: NameSource | None = None,
    ) -> Document:
        try:
            digests = await self._upload(row, data, sha256, md5, resumed=resumed)  # C2
            await failpoints.hit("create.after_upload")
            if rename is not None:
                await self._rename(row, await rename())
            await self._tag_committed(row)  # C3
            await failpoints.hit("create.after_tag")
        except BaseException:
            await asyncio.shield(self._abandon(row.name, row.document_id, BlobKind.CREATE))
            raise
        now = self.clock()
        values = dict(b_id=row.document_id, b_name=row.name, b_size=digests.size,
                      b_sha256=digests.sha256, b_md5=digests.md5, b_now=now)
        async with self.db.transaction() as conn:  # C4
            await conn.execute(statements.commit_blob, values)
            ready = (await conn.execute(statements.ready_document, values)).one_or_none()
            if ready is None:  # the sweeper may have rolled the creation forward meanwhile
                ready = (await conn.execute(select(statements.documents).where(
                    statements.documents.c.id == row.document_id))).one_or_none()
            if (ready is None or ready.status != DocumentStatus.READY
                    or ready.blob_name != row.name):
                raise UploadAborted("the upload's intent was resolved by the sweeper meanwhile")
        await failpoints.hit("create.after_commit")
        return Document.from_row(ready)

    async def _existing_intent(
        self, key: str, name: str | None, data: Data, rename: NameSource | None = None
    ) -> Document | BlobRow | None:
        """What an earlier attempt under ``key`` left: a finished document, an intent this
        attempt now owns (its lease renewed), or nothing."""
        now = self.clock()
        async with self.db.session() as session:
            row = (await session.execute(
                select(BlobRow).where(BlobRow.idempotency_key == key))).scalar_one_or_none()
            if row is None:
                return None
            doc = await session.get(DocumentRow, row.document_id)
            if doc is not None and name is not None and doc.name != name:
                raise IdempotencyConflict("idempotency key was used for a different name")
            if row.state == BlobState.PENDING:
                if row.lease_until > now:
                    raise IdempotencyInProgress("an attempt with this idempotency key is running")
                claimed = await session.execute(
                    update(BlobRow)
                    .where(BlobRow.name == row.name, BlobRow.state == BlobState.PENDING,
                           BlobRow.lease_until == row.lease_until)
                    .values(lease_until=now + timedelta(seconds=self.settings.upload_deadline),
                            changed_at=now))
                if _rowcount(claimed) != 1:
                    raise IdempotencyInProgress("an attempt with this idempotency key is running")
                return BlobRow(name=row.name, document_id=row.document_id,
                               content_type=row.content_type,
                               lease_until=now + timedelta(seconds=self.settings.upload_deadline))
            recorded = row.sha256
        digests = await self._digest(data)
        if digests.sha256 != recorded:
            raise IdempotencyConflict("idempotency key was used with different bytes")
        if doc is None or doc.status != DocumentStatus.READY:
            raise IdempotencyConflict("the document created with this key has been deleted")
        if rename is not None and check_document_name(await rename()) != doc.name:
            raise IdempotencyConflict("idempotency key was used for a different name")
        return Document.from_row(doc)

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
    ) -> Document:
        """Point the document at new bytes if its version is still ``expected_version``."""
        now = self.clock()
        async with self.db.session() as session:  # R1
            doc = await self._ready_row(session, doc_id)
            if doc.version != expected_version:
                raise PreconditionFailed(
                    f"document is at version {doc.version}, not {expected_version}",
                    current_version=doc.version)
            content_type = check_content_type(content_type or doc.content_type)
            old_blob = doc.blob_name
            row = BlobRow(
                name=new_blob_name(self.settings.blob_prefix, doc.name), document_id=doc_id,
                kind=BlobKind.REPLACE, state=BlobState.PENDING, content_type=content_type,
                lease_until=now + timedelta(seconds=self.settings.upload_deadline),
                created_at=now, changed_at=now)
            session.add(row)
        await failpoints.hit("replace.after_insert")
        try:
            digests = await self._upload(row, data, sha256, md5, resumed=False)  # R2
            await failpoints.hit("replace.after_upload")
            await self._tag_committed(row)  # R3
            await failpoints.hit("replace.after_tag")
        except BaseException:
            await asyncio.shield(self._abandon(row.name, doc_id, BlobKind.REPLACE))
            raise
        now = self.clock()
        async with self.db.session() as session:  # R4
            moved = await session.execute(
                update(DocumentRow)
                .where(DocumentRow.id == doc_id, DocumentRow.version == expected_version,
                       DocumentRow.status == DocumentStatus.READY)
                .values(blob_name=row.name, version=expected_version + 1, size=digests.size,
                        sha256=digests.sha256, md5=digests.md5, content_type=content_type,
                        updated_at=now))
            won = _rowcount(moved) == 1
            await session.execute(
                update(BlobRow).where(BlobRow.name == row.name).values(
                    state=BlobState.COMMITTED if won else BlobState.DELETING,
                    size=digests.size, sha256=digests.sha256, md5=digests.md5, changed_at=now,
                    lease_until=now))  # the upload's lease ends with it
            if won:
                await session.execute(
                    update(BlobRow)
                    .where(BlobRow.name == old_blob, BlobRow.state == BlobState.COMMITTED)
                    .values(state=BlobState.DELETING, changed_at=now, lease_until=now))
        await failpoints.hit("replace.after_commit")
        current = await self.get(doc_id)  # NotFound if deleted meanwhile
        if not won:
            raise PreconditionFailed(
                f"document is at version {current.version}, not {expected_version}",
                current_version=current.version)
        return current

    # -- delete ---------------------------------------------------------------------------
    async def delete(self, doc_id: str, *, expected_version: int | None = None) -> None:
        """Remove the document now; its blob goes to the deletion path."""
        now = self.clock()
        async with self.db.session() as session:
            doc = await self._ready_row(session, doc_id)
            if expected_version is not None and doc.version != expected_version:
                raise PreconditionFailed(
                    f"document is at version {doc.version}, not {expected_version}",
                    current_version=doc.version)
            gone = await session.execute(
                delete(DocumentRow).where(DocumentRow.id == doc_id,
                                          DocumentRow.version == doc.version))
            if _rowcount(gone) != 1:
                raise PreconditionFailed("document changed while it was being deleted")
            await session.execute(
                update(BlobRow).where(BlobRow.name == doc.blob_name)
                .values(state=BlobState.DELETING, changed_at=now, lease_until=now))
        await failpoints.hit("delete.after_commit")

    # -- reads ----------------------------------------------------------------------------
    async def get(self, doc_id: str) -> Document:
        """A ready document; NotFound for unknown and pending ids alike."""
        async with self.db.session() as session:
            return Document.from_row(await self._ready_row(session, doc_id))

    async def open(
        self, doc_id: str, start: int = 0, length: int | None = None
    ) -> tuple[Document, BlobReader]:
        """The document and an open ranged read of its bytes."""
        doc = await self.get(doc_id)
        try:
            return doc, await self.store.open(doc.blob, start, length)
        except BlobNotFound:
            again = await self.get(doc_id)  # a replace may have moved it: re-read once
            if again.blob == doc.blob:
                raise StoreError(f"blob of ready document {doc_id} is missing") from None
            return again, await self.store.open(again.blob, start, length)

    async def read(
        self, doc_id: str, start: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes]:
        """The bytes of a ready document, streamed."""
        _, reader = await self.open(doc_id, start, length)
        try:
            async for chunk in reader:
                yield chunk
        finally:
            await reader.aclose()

    async def page(
        self, *, prefix: str = "", after: str | None = None, limit: int = 100
    ) -> list[Document]:
        """Up to ``limit`` ready documents in name order, after the name ``after``."""
        query = (select(DocumentRow)
                 .where(DocumentRow.status == DocumentStatus.READY)
                 .order_by(DocumentRow.name).limit(limit))
        if prefix:
            query = query.where(DocumentRow.name.startswith(prefix, autoescape=True))
        if after is not None:
            query = query.where(DocumentRow.name > after)
        async with self.db.session() as session:
            rows = (await session.execute(query)).scalars().all()
        return [Document.from_row(row) for row in rows]

    async def list(self, prefix: str = "") -> AsyncIterator[Document]:
        """Every ready document under ``prefix``, in name order, fetched page by page."""
        after: str | None = None
        while True:
            batch = await self.page(prefix=prefix, after=after, limit=PAGE)
            for doc in batch:
                yield doc
            if len(batch) < PAGE:
                return
            after = batch[-1].name

    # -- steps shared by create and replace -----------------------------------------------
    async def _upload(
        self, row: BlobRow, data: Data, sha256: str | None, md5: str | None, *, resumed: bool
    ) -> Digests:
        """C2/R2: create-only put of the intent's blob, within the intent's deadline."""
        remaining = (row.lease_until - self.clock()).total_seconds()
        stream = failpoints.stream(
            limit_size(as_stream(data), self.settings.max_upload_bytes), "put.mid_stream")
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                if resumed and (done := await self._already_uploaded(row, stream)):
                    verify(done, sha256, md5)
                    return done
                return await self.store.put(
                    row.name, stream, tags=PENDING, content_type=row.content_type,
                    expected_sha256=sha256, expected_md5=md5)
        except TimeoutError:
            raise UploadAborted("the upload ran past its deadline") from None
        except BlobAlreadyExists as exc:
            # A create-only put of our own name failed: either our own earlier attempt
            # won (a lost response, an SDK retry, a resumed intent) or the bytes differ.
            info = await self.store.stat(row.name)
            if exc.computed is not None and info.sha256 == exc.computed.sha256:
                return exc.computed
            if resumed:
                raise IdempotencyConflict(
                    "idempotency key was used with different bytes") from None
            raise

    async def _already_uploaded(
        self, row: BlobRow, stream: AsyncIterable[bytes]
    ) -> Digests | None:
        """On a resumed intent whose dead attempt finished its upload: hash our bytes
        instead of sending them again (which on Azure would leave a second set of blocks
        uncommitted beside the blob). The create-only put still guards the other case."""
        try:
            info = await self.store.stat(row.name)
        except BlobNotFound:
            return None
        digests = await self._digest(stream)
        if info.sha256 != digests.sha256:
            raise IdempotencyConflict("idempotency key was used with different bytes")
        return digests

    async def _rename(self, row: BlobRow, name: str) -> None:
        """Give a pending document recorded under a placeholder its real name (before C3)."""
        name = check_document_name(name)
        try:
            async with self.db.session() as session:
                doc = await session.get(DocumentRow, row.document_id)
                if doc is None or doc.status != DocumentStatus.PENDING:
                    raise UploadAborted("the upload's intent was resolved meanwhile")
                if doc.name == name:
                    return  # a resumed intent that was already renamed
                if not doc.name.startswith(PLACEHOLDER):
                    raise IdempotencyConflict("idempotency key was used for a different name")
                await session.execute(
                    update(DocumentRow)
                    .where(DocumentRow.id == row.document_id,
                           DocumentRow.status == DocumentStatus.PENDING)
                    .values(name=name))
        except DBIntegrityError:
            raise NameTaken(f"a document named {name!r} already exists") from None

    async def _tag_committed(self, row: BlobRow) -> None:
        """C3/R3: tag the blob committed, conditioned on it still being pending."""
        if self.clock() >= row.lease_until:
            raise UploadAborted("the upload ran past its deadline")
        try:
            await self.store.set_tags(row.name, COMMITTED, if_tags=PENDING)
        except ConditionNotMet:
            if (await self.store.get_tags(row.name)).get(STATE_TAG) != BlobState.COMMITTED:
                raise

    async def _abandon(self, blob_name: str, doc_id: str, kind: BlobKind) -> None:
        """Live failure path: delete the pending blob, then the rows; else leave it all to
        the sweeper (and release the lease so a retry may resume at once)."""
        try:
            await self.store.delete(blob_name, if_tags=PENDING)
        except BaseException as exc:
            log.warning("compensating delete of %s failed (%s); left to the sweeper",
                        blob_name, type(exc).__name__)
            await self._release(blob_name)
            return
        try:
            async with self.db.session() as session:
                await session.execute(delete(BlobRow).where(
                    BlobRow.name == blob_name, BlobRow.state == BlobState.PENDING))
                if kind == BlobKind.CREATE:
                    await session.execute(delete(DocumentRow).where(
                        DocumentRow.id == doc_id, DocumentRow.status == DocumentStatus.PENDING,
                        DocumentRow.blob_name == blob_name))
        except Exception as exc:
            log.warning("removing abandoned rows of %s failed (%s); left to the sweeper",
                        blob_name, type(exc).__name__)

    async def _release(self, blob_name: str) -> None:
        try:
            async with self.db.session() as session:
                await session.execute(
                    update(BlobRow)
                    .where(BlobRow.name == blob_name, BlobRow.state == BlobState.PENDING)
                    .values(lease_until=self.clock()))
        except Exception:
            pass

    async def _digest(self, data: Data) -> Digests:
        hasher = Hasher()
        async for chunk in limit_size(as_stream(data), self.settings.max_upload_bytes):
            await hasher.update(chunk)
        return hasher.digests()

    @staticmethod
    async def _ready_row(session: AsyncSession, doc_id: str) -> DocumentRow:
        doc = await session.get(DocumentRow, doc_id) if isinstance(doc_id, str) else None
        if doc is None or doc.status != DocumentStatus.READY:
            raise NotFound(f"no document {doc_id!r}")
        return doc


def _rowcount(result: object) -> int:
    return int(getattr(result, "rowcount", 0))




__all__ = ["BlobLedgerError", "Ledger"]
