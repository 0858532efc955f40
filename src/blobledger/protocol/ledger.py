"""The ledger: create, replace, delete and read on the protocol (docs/protocol.md).

Create is C1 (rows, pending), C2 (create-only upload, tagged pending), confirm (the intent is
still this attempt's), C3 (tag committed), C4 (rows committed/ready). Replace is R1, R2,
confirm, R3, R4; R5 is the deletion path's work. With ``BLOBLEDGER_RETAG=deferred`` a
create is C1, C2, C4 and a replace R1, R2, R4: C4/R4's compare-and-set stands for confirm,
and records in the same statement that the retag is owed; the retag worker
(:mod:`blobledger.workers.retagger`) performs it. Delete is one transaction that hands the
blob to the deletion path. Stage (attachments) is A1, A2, confirm, A3: a blob owned by nobody
until an application's transaction attaches it (A4, :mod:`blobledger.sqlalchemy`). Each step
is a method of its own (``begin_create``, ``upload``, ``confirm``, ``tag_committed``,
``commit_create``; ``begin_replace``, ``commit_replace``; ``stage``) and every change to
the tables is a named compare-and-set in :mod:`blobledger.protocol.transitions`: a writer that was
paused while a sweeper or a retry took its intent over loses every later step and does
nothing further (``IntentLost``).

No database connection is held while bytes stream. A compensating delete runs only on the
failure path of a live process that still owns its intent: it is an optimisation, the
sweeper is the correctness argument. This module never deletes a blob that is not tagged
``pending``, and never one whose row another actor owns.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from typing import NoReturn, TypeVar

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import IntegrityError as DBIntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from blobledger import failpoints, telemetry
from blobledger._base import metrics
from blobledger._base.names import (
    check_blob_name,
    check_content_type,
    check_document_name,
    check_name_prefix,
    new_blob_name,
    new_document_id,
)
from blobledger.config import Settings, held_by_settings
from blobledger.config import from_env as settings_from_env
from blobledger.db import Database, connection_lost, once_more_if_lost
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    ConfigError,
    Digests,
    IdempotencyConflict,
    IdempotencyInProgress,
    IntentLost,
    InvalidInput,
    InvalidName,
    NameTaken,
    NotFound,
    OffsetMismatch,
    PreconditionFailed,
    StoreError,
    UploadAborted,
    UploadGone,
)
from blobledger.protocol.attachments import Attachment, StagedBlob, StagedUpload
from blobledger.protocol.documents import Data, Document, as_stream, limit_size
from blobledger.protocol.events import Event
from blobledger.protocol.held import Held, HoldState
from blobledger.protocol.keys import SIGNING, service_key
from blobledger.protocol.migrate import migrate_database
from blobledger.protocol.models import (
    COMMITTED_TAG as COMMITTED,
)
from blobledger.protocol.models import (
    PENDING_TAG as PENDING,
)
from blobledger.protocol.models import (
    SCHEMA,
    SCHEMA_ENV,
    STATE_TAG,
    TABLE_PREFIX,
    TABLE_PREFIX_ENV,
    BlobKind,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    EventType,
    KeyState,
    UploadState,
    as_utc,
    utcnow,
)
from blobledger.protocol.transitions import (
    PLACEHOLDER,
    Intent,
    Transitions,
    new_token,
    readable,
)
from blobledger.stores import Store, check_store_url, open_store
from blobledger.stores.base import BlobReader, Hasher, verify

log = logging.getLogger("blobledger.ledger")

_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
PAGE = 500

#: a name known only after the bytes have streamed (see ``Ledger.create``)
NameSource = Callable[[], Awaitable[str]]
#: an in-process event handler (see ``Ledger.on``)
H = TypeVar("H", bound=Callable[..., object])
LOST = "the upload was abandoned: its intent was taken over while this attempt was paused"


_STEPS = {
    BlobKind.CREATE: {"begin_create": "C1", "upload": "C2", "confirm": "C2-C3",
                      "tag_committed": "C3", "commit_create": "C4"},
    BlobKind.REPLACE: {"begin_replace": "R1", "upload": "R2", "confirm": "R2-R3",
                       "tag_committed": "R3", "commit_replace": "R4"},
}


def _step(name: str, intent: Intent) -> telemetry.SpanLike:
    """The span of one protocol step of this intent (nothing when tracing is off)."""
    if not telemetry.enabled():
        return telemetry.OFF
    return telemetry.span(name, step=_STEPS[intent.kind][name],
                          document_id=intent.document_id, blob_name=intent.blob_name)


class Ledger:
    """Documents whose bytes live in a store and whose truth lives in a database."""

    def __init__(
        self,
        db: Database,
        store: Store,
        settings: Settings | None = None,
        *,
        clock_offset: float = 0.0,
        migrate: bool = True,
        create: bool = True,
    ) -> None:
        self.db = db
        self.store = store
        self.transitions = Transitions(db, settings or Settings(), clock_offset)
        #: the processing of held documents (``protocol/held.py``)
        self.held = Held(self.transitions)
        if self.settings.version_table:
            db.version_table = self.settings.version_table
        _check_layout(self.settings)
        self._migrate = migrate
        self._creates = create
        #: in-process event handlers by event type (:meth:`on`), called by the delivery worker
        self.handlers: dict[str, list[Callable[[Event], object]]] = {}
        #: set by every C4/R4 that left its retag owed (the deferred form): wakes this
        #: process's retag worker (``blobledger.workers.retagger``) at once
        self.retag_owed = asyncio.Event()
        self._signing_key: bytes | None = None

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_urls(
        cls,
        database_url: str,
        store_url: str,
        *,
        settings: Settings | None = None,
        clock_offset: float = 0.0,
        migrate: bool = True,
    ) -> Ledger:
        settings = (settings or settings_from_env()).with_(
            database_url=database_url, store_url=store_url
        )
        return cls(Database(database_url), open_store(store_url, settings), settings,
                   clock_offset=clock_offset, migrate=migrate)

    @classmethod
    def from_engine(
        cls,
        engine: AsyncEngine,
        store_url: str,
        *,
        settings: Settings | None = None,
        clock_offset: float = 0.0,
        migrate: bool = True,
    ) -> Ledger:
        """A ledger on the application's own async engine: its tables live in the
        application's database, so an attachment commits with the owner's row. The engine
        stays the application's (closing the ledger does not dispose of it)."""
        db = Database.from_engine(engine)
        settings = (settings or settings_from_env()).with_(
            database_url=db.url, store_url=store_url)
        return cls(db, open_store(store_url, settings), settings, clock_offset=clock_offset,
                   migrate=migrate)

    @classmethod
    def from_env(cls, *, migrate: bool = True) -> Ledger:
        """A ledger configured by ``BLOBLEDGER_*`` (see :mod:`blobledger.config`)."""
        return cls.from_settings(settings_from_env(), migrate=migrate)

    @classmethod
    def from_settings(cls, settings: Settings, *, migrate: bool = True,
                      create: bool = True) -> Ledger:
        """A ledger on the database and store these settings name. Their test hooks apply:
        ``clock_offset`` (a process that lives hours ahead of the database's clock) and
        ``failpoints`` (armed for this process). With ``otel`` on, spans go to the
        process's tracer provider, SQLAlchemy's under them. ``create`` False (with
        ``migrate`` False): a database or a store that does not exist is a ConfigError,
        never made (a SQLite file, a local folder, a container or a bucket)."""
        if settings.failpoints:
            failpoints.configure(settings.failpoints)
        if settings.otel and not telemetry.enabled():
            telemetry.enable()  # on the process's tracer provider
        check_store_url(settings.store_url)  # a mistaken URL before a missing database
        db = Database(settings.database_url, create=create)
        if settings.otel:
            telemetry.instrument_engine(db.engine)
        return cls(db, open_store(settings.store_url, settings, create=create), settings,
                   clock_offset=settings.clock_offset, migrate=migrate, create=create)

    async def connect(self) -> Ledger:
        """Reach the database (migrating it unless told not to) and prepare the store (or,
        when told not to create anything, only reach it)."""
        if self._migrate:
            await migrate_database(self.db)
        else:
            await self.db.ping()
        if self._creates:
            await self.store.prepare()
        else:
            await self.store.ping()
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

    @property
    def settings(self) -> Settings:
        return self.transitions.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.transitions.settings = settings

    # -- events ---------------------------------------------------------------------------
    def on(self, event_type: str) -> Callable[[H], H]:
        """Register an in-process handler for an event type (``document.ready``, …): a sync
        or async callable taking the :class:`~blobledger.protocol.events.Event`, called at
        least once per event by the delivery worker that runs with this ledger
        (:mod:`blobledger.workers.delivery`). Raising (or returning False) is a failed
        attempt, retried with backoff. Handlers must be idempotent (key: ``event.event_id``).
        """
        if event_type not in {kind.value for kind in EventType}:
            raise InvalidInput(f"no event type {event_type!r} (one of: "
                               f"{', '.join(kind.value for kind in EventType)})")

        def register(handler: H) -> H:
            self.handlers.setdefault(event_type, []).append(handler)
            return handler

        return register

    # -- time -----------------------------------------------------------------------------
    @property
    def clock_offset(self) -> float:
        """Seconds added to the database's clock for this ledger's leases and ages."""
        return self.transitions.offset

    @clock_offset.setter
    def clock_offset(self, seconds: float) -> None:
        self.transitions.offset = float(seconds)

    def clock(self) -> datetime:
        """This process's own view of now (its clock plus the offset), for reports; leases
        and ages are decided on the database's clock (:meth:`now`)."""
        return utcnow() + timedelta(seconds=self.clock_offset)

    async def now(self) -> datetime:
        """The database's clock plus the offset (naive UTC)."""
        value = await self.transitions.now()
        return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))

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
    ) -> Document:
        """Create a document; it becomes visible only once its bytes are committed (the span
        ``create``, parent of the steps' spans).

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
        """
        if name is None and name_after_upload is None:
            raise InvalidName("a document needs a name")
        if name is not None:
            name = check_document_name(name)
        content_type = check_content_type(content_type)
        if idempotency_key is not None and not _KEY.match(idempotency_key):
            raise InvalidInput("idempotency key must be 1-255 visible ASCII characters")
        with telemetry.span("create") as span:
            doc = await self._create(name, data, content_type, idempotency_key, sha256, md5,
                                     name_after_upload, hold, owner)
            span.set("document_id", doc.id)
            span.set("blob_name", doc.blob)
            return doc

    async def _create(
        self, name: str | None, data: Data, content_type: str, idempotency_key: str | None,
        sha256: str | None, md5: str | None, name_after_upload: NameSource | None,
        hold: bool = False, owner: str | None = None,
    ) -> Document:
        rename = name_after_upload if name is None else None
        intent: Intent | None = None
        if idempotency_key is not None:
            found = await self._by_key(idempotency_key, name, content_type, data, rename)
            if isinstance(found, Document):
                return found
            intent = found
        resumed = intent is not None
        if intent is None:
            try:
                intent = await self.begin_create(name, content_type, idempotency_key,
                                                 hold=hold, owner=owner)
            except DBIntegrityError:  # the key was reserved meanwhile: look again
                assert idempotency_key is not None
                found = await self._by_key(idempotency_key, name, content_type, data, rename)
                if isinstance(found, Document):
                    return found
                if found is None:
                    raise IdempotencyInProgress(
                        "an attempt with this idempotency key is running") from None
                intent, resumed = found, True
        if intent.placeholder is not None and name is not None:
            rename = _known(name)  # a retry that knows the name its dead attempt did not
        return await self._finish_create(intent, data, sha256, md5, resumed=resumed,
                                         rename=rename)

    async def begin_create(
        self, name: str | None, content_type: str, idempotency_key: str | None = None, *,
        hold: bool = False, owner: str | None = None,
    ) -> Intent:
        """C1: the pending document and blob row, this attempt's; NameTaken if the name is
        taken (``None``: recorded under a placeholder until :meth:`confirm` names it)."""
        doc_id = new_document_id()
        placeholder = PLACEHOLDER + doc_id if name is None else None
        intent = Intent(
            blob_name=new_blob_name(self.settings.blob_prefix, name or ""),
            document_id=doc_id, kind=BlobKind.CREATE, attempt=new_token(),
            content_type=content_type, placeholder=placeholder,
            deadline=_deadline(self.settings.upload_deadline), hold=hold, owner=owner,
            keyed=idempotency_key is not None, name=name)

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
        resumed: bool, rename: NameSource | None = None,
    ) -> Document:
        deferred = self.transitions.deferred
        try:
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
    ) -> Document:
        """Point the document at new bytes if its version is still ``expected_version``;
        returns the document as this replace wrote it (the span ``replace``, parent of the
        steps' spans)."""
        with telemetry.span("replace", document_id=doc_id) as span:
            intent = await self.begin_replace(doc_id, expected_version, content_type)
            span.set("blob_name", intent.blob_name)
            try:
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
        if the version already differs)."""
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
        intent = Intent(
            blob_name=new_blob_name(self.settings.blob_prefix, doc.name), document_id=doc_id,
            kind=BlobKind.REPLACE, attempt=new_token(),
            content_type=check_content_type(content_type or doc.content_type),
            expected_version=expected_version, old_blob=doc.blob_name,
            deadline=_deadline(self.settings.upload_deadline))
        with _step("begin_replace", intent):
            await self.inserted(intent, self.transitions.begin_replace(intent))
        await failpoints.hit("replace.after_insert")
        return intent

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

    async def hold_state(self, doc_id: str) -> HoldState | None:
        """A held or rejected document's state (``held`` with each processor's verdict so
        far, or ``rejected`` with the reason); None for a ready or unknown id. For its
        writer only: the caller compares ``owner`` (readers are told NotFound)."""
        if not isinstance(doc_id, str) or not _plausible_id(doc_id):
            return None
        return await self.held.state(doc_id)

    # -- reads ----------------------------------------------------------------------------
    async def get(self, doc_id: str) -> Document:
        """A ready document; NotFound for unknown and pending ids alike (and for a string no
        id can be, such as one holding a NUL, which some databases refuse to compare)."""
        if not isinstance(doc_id, str) or len(doc_id) > 128 or not doc_id.isprintable():
            raise NotFound(f"no document {doc_id!r}"[:200])
        async with self.db.session(readonly=True) as session:
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

    async def signing_key(self) -> bytes:
        """The key of the service's own read URLs and download links: from
        ``BLOBLEDGER_SIGNING_KEY``, else generated once and kept in the database (every
        process of the deployment reads the same one). No client ever holds it."""
        if self._signing_key is None:
            configured = self.settings.signing_key
            self._signing_key = (hashlib.sha256(b"blobledger-signing\x00"
                                                + configured.encode()).digest()
                                 if configured else await service_key(self.db, SIGNING))
        return self._signing_key

    async def former(self, doc_id: str, version: int, blob_name: str) -> Document:
        """The document as it read at ``version``, whose bytes are ``blob_name``: a blob it
        points at, or one it left (replaced, deleted) that the deletion path has not taken
        yet, described by the blob's own row (its name the document's, if it is still there,
        else the blob's file name or the id). NotFound otherwise. The caller vouches that
        the document pointed at that blob at that version (a signed read URL does: the
        service signs only a ready document's current blob and version). A held document's
        blob, or a rejected one's, is NotFound (:func:`~blobledger.protocol.transitions.
        readable` decides, as for :meth:`get`)."""
        row, name = await self.transitions.pointed_blob(doc_id, blob_name)
        if row is None:
            raise NotFound(f"document {doc_id} no longer holds that blob")
        made = as_utc(row.created_at)
        return Document(id=doc_id, name=name or row.filename or doc_id, status="ready",
                        version=version, size=row.size, content_type=row.content_type,
                        sha256=row.sha256, blob=row.name, created_at=made, updated_at=made)

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
        """Up to ``limit`` ready documents in name order, after the name ``after``.

        ``prefix`` matches case-sensitively on every database (SQLite's LIKE ignores ASCII
        case: the exact comparison of the leading characters decides). A prefix or ``after``
        holding a character no name can hold is InvalidInput."""
        prefix = check_name_prefix(prefix)
        query = (select(DocumentRow)
                 .where(DocumentRow.status == DocumentStatus.READY)
                 .order_by(DocumentRow.name).limit(limit))
        if prefix:
            query = query.where(DocumentRow.name.startswith(prefix, autoescape=True),
                                func.substr(DocumentRow.name, 1, len(prefix)) == prefix)
        if after is not None:
            query = query.where(DocumentRow.name > check_name_prefix(after))
        async with self.db.session(readonly=True) as session:
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
    async def upload(
        self, intent: Intent, data: Data, sha256: str | None = None, md5: str | None = None,
        *, resumed: bool = False,
    ) -> Digests:
        """C2/R2: create-only put of the intent's blob, within the intent's deadline."""
        remaining = intent.deadline - asyncio.get_running_loop().time()
        stream = failpoints.stream(
            limit_size(as_stream(data), self.settings.max_upload_bytes), "put.mid_stream")
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                if resumed and (done := await self._already_uploaded(intent, stream)):
                    verify(done, sha256, md5)
                    return done
                return await self.store.put(
                    intent.blob_name, stream, tags=PENDING, content_type=intent.content_type,
                    expected_sha256=sha256, expected_md5=md5)
        except TimeoutError:
            raise UploadAborted("the upload ran past its deadline") from None
        except BlobAlreadyExists as exc:
            # A create-only put of our own name failed: either our own earlier attempt
            # won (a lost response, an SDK retry, a resumed intent) or the bytes differ.
            info = await self.store.stat(intent.blob_name)
            if exc.computed is not None and info.sha256 == exc.computed.sha256:
                return exc.computed
            if resumed:
                raise IdempotencyConflict(
                    "idempotency key was used with different bytes") from None
            raise

    async def _already_uploaded(
        self, intent: Intent, stream: AsyncIterable[bytes]
    ) -> Digests | None:
        """On a resumed intent whose dead attempt finished its upload: hash our bytes
        instead of sending them again (which on Azure would leave a second set of blocks
        uncommitted beside the blob). The create-only put still guards the other case."""
        try:
            info = await self.store.stat(intent.blob_name)
        except BlobNotFound:
            return None
        digests = await self._digest(stream)
        if info.sha256 != digests.sha256:
            raise IdempotencyConflict("idempotency key was used with different bytes")
        return digests

    async def confirm(self, intent: Intent, name: str | None = None) -> None:
        """Before C3/R3: compare-and-set that the intent is still this attempt's, extending
        its lease (and naming a creation recorded under a placeholder). If it is not, a
        blob whose row is gone is deleted (conditioned on ``pending``) and IntentLost
        raised: a blob whose intent was swept must never be tagged committed. A connection
        lost under it is tried once more (a second run after an applied first only extends
        the lease again; the name is already the real one)."""
        confirmed, _ = await once_more_if_lost(
            lambda: self.transitions.confirm(intent, rename=name))
        if confirmed:
            return
        await self._lost(intent)

    async def inserted(self, intent: Intent, insert: Awaitable[None],
                       again: Callable[[], Awaitable[None]] | None = None) -> None:
        """C1/R1/A1 (and an upload's creation, :func:`blobledger.uploads.resumable.begin`):
        the intent's rows inserted. If the connection was lost under the insert
        (its COMMIT may have applied), the rows are looked for: found under this attempt's
        token, the intent is this attempt's and it goes on; not found, the error stands
        (rows that land late are the sweeper's), except for an insert that is one
        autocommit statement (``again``: C1 on PostgreSQL, which has no BEGIN to find a dead
        connection with). That one runs once more: the two runs insert the same unique
        keys (the document's id, the blob's name), so the server lets at most one land and
        the second waits for the first's outcome; a second run that collides is recognised
        by this attempt's token, as above."""
        try:
            await insert
            return
        except DBAPIError as exc:
            if not connection_lost(exc):
                raise
            if await self.transitions.owns(intent):
                return
            if again is None:
                raise
        try:
            await again()
        except (NameTaken, DBAPIError):
            if not await self.transitions.owns(intent):
                raise

    async def _lost(self, intent: Intent) -> NoReturn:
        """The intent was taken while this attempt was paused: delete our blob if its row is
        gone (conditioned on ``pending``), then IntentLost."""
        await self.drop_lost(intent)
        raise IntentLost(LOST)

    async def drop_lost(self, intent: Intent) -> None:
        """A writer whose intent was taken while it was paused: its blob deleted if the
        blob's row is gone (conditioned on ``pending``; a row still there is the sweeper's
        or the deletion path's to resolve). Failures are logged, not raised."""
        try:
            async with self.db.session(readonly=True) as session:
                row = await session.get(BlobRow, intent.blob_name)
            if row is None:
                await self.store.delete(intent.blob_name, if_tags=PENDING)
        except (BlobLedgerError, OSError) as exc:
            log.warning("removing the blob of lost intent %s failed (%s)", intent.blob_name,
                        type(exc).__name__)

    async def tag_committed(self, intent: Intent) -> None:
        """C3/R3/A3: tag the blob committed, conditioned on it still being pending. If that
        fails because the intent was taken meanwhile (the writer paused past its lease after
        its confirm while the sweeper removed the blob), IntentLost, not the store's error;
        a failure while the intent is still this attempt's passes through."""
        try:
            try:
                await self.store.set_tags(intent.blob_name, COMMITTED, if_tags=PENDING)
            except ConditionNotMet:
                if (await self.store.get_tags(intent.blob_name)).get(STATE_TAG) != \
                        BlobState.COMMITTED:
                    raise
        except BlobLedgerError as exc:
            if await self.transitions.owns(intent):
                raise
            raise IntentLost(LOST) from exc

    async def _fail(self, intent: Intent, exc: BaseException) -> None:
        """A live writer's failure path: compensate if the intent is still ours; if it is
        not (a sweeper or a retry took it while this attempt was paused), say so."""
        if isinstance(exc, IntentLost):
            return
        owned = await asyncio.shield(self.abandon(intent))
        if owned is False and isinstance(exc, Exception):
            raise IntentLost(LOST) from exc

    async def abandon(self, intent: Intent) -> bool | None:
        """Hand the intent to the deletion path if it is still this attempt's and delete its
        blob conditioned on ``pending``; True if it was ours, False if not, None if the
        database could not say (the sweeper resolves it)."""
        return await self._abandon(intent, None)

    async def give_up(self, intent: Intent, upload_id: str) -> bool | None:
        """:meth:`abandon` for an upload whose client lied about its bytes, only while no
        completion has verified that upload (:meth:`Transitions.abandon`)."""
        return await self._abandon(intent, upload_id)

    async def _abandon(self, intent: Intent, upload_id: str | None) -> bool | None:
        try:
            if not await self.transitions.abandon(intent, upload_id):
                return False
        except Exception as exc:
            log.warning("abandoning %s failed (%s); left to the sweeper", intent.blob_name,
                        type(exc).__name__)
            return None
        try:
            await self.store.delete(intent.blob_name, if_tags=PENDING)
            await self.transitions.remove_abandoned(intent.blob_name)
        except ConditionNotMet:
            pass  # tagged committed already: the deletion path retags and deletes it
        except Exception as exc:
            log.warning("compensating delete of %s failed (%s); left to the deletion path",
                        intent.blob_name, type(exc).__name__)
        return True

    async def _digest(self, data: Data) -> Digests:
        hasher = Hasher()
        async for chunk in limit_size(as_stream(data), self.settings.max_upload_bytes):
            await hasher.update(chunk)
        return hasher.digests()

    @staticmethod
    async def _ready_row(session: AsyncSession, doc_id: str) -> DocumentRow:
        doc = await session.get(DocumentRow, doc_id) if isinstance(doc_id, str) else None
        if doc is None or not readable(doc.status):
            raise NotFound(f"no document {doc_id!r}")
        return doc


def _known(name: str) -> NameSource:
    async def source() -> str:
        return name

    return source


def _check_layout(settings: Settings) -> None:
    """The settings' table layout is the one this process's statements were built for."""
    for wanted, built, env in ((settings.table_prefix, TABLE_PREFIX, TABLE_PREFIX_ENV),
                               (settings.db_schema, SCHEMA, SCHEMA_ENV)):
        if wanted is not None and (wanted or None) != (built or None):
            raise ConfigError(f"{env}={wanted!r} was set after blobledger was imported "
                              f"(its tables are {built!r}): set it before the import")


def _deadline(seconds: float) -> float:
    """The loop-clock instant an upload started now must finish by."""
    return asyncio.get_running_loop().time() + seconds


__all__ = ["BlobLedgerError", "Ledger"]


def _plausible_id(text: str) -> bool:
    """Whether ``text`` can be an id at all (a string holding a NUL, which some databases
    refuse to compare, cannot)."""
    return len(text) <= 128 and text.isprintable()
