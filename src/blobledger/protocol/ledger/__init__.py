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
sweeper is the correctness argument. The ledger never deletes a blob that is not tagged
``pending``, and never one whose row another actor owns.

:class:`Ledger` is built from its rooms, one per writer it serves:
:mod:`~blobledger.protocol.ledger.documents` (create, replace, delete),
:mod:`~blobledger.protocol.ledger.attachments` (stage), on
:mod:`~blobledger.protocol.ledger.reads` and :mod:`~blobledger.protocol.ledger.steps` (the
steps they share: C2, confirm, C3 and the failure path); this module holds its construction,
its event handlers and its clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from blobledger import failpoints, telemetry
from blobledger.config import Settings
from blobledger.config import from_env as settings_from_env
from blobledger.db import Database
from blobledger.errors import BlobLedgerError, ConfigError, InvalidInput
from blobledger.protocol.buckets import Buckets
from blobledger.protocol.events import Event
from blobledger.protocol.held import Held
from blobledger.protocol.ledger.attachments import AttachmentWriter
from blobledger.protocol.ledger.documents import DocumentWriter
from blobledger.protocol.migrate import migrate_database
from blobledger.protocol.models import (
    SCHEMA,
    SCHEMA_ENV,
    TABLE_PREFIX,
    TABLE_PREFIX_ENV,
    EventType,
    utcnow,
)
from blobledger.protocol.transitions import Transitions
from blobledger.stores import Store, check_store_url, open_store

#: an in-process event handler (see ``Ledger.on``)
H = TypeVar("H", bound=Callable[..., object])


class Ledger(DocumentWriter, AttachmentWriter):
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
        #: the buckets, namespaces of documents with their own settings (docs/buckets.md)
        self.buckets = Buckets(db)
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



def _check_layout(settings: Settings) -> None:
    """The settings' table layout is the one this process's statements were built for."""
    for wanted, built, env in ((settings.table_prefix, TABLE_PREFIX, TABLE_PREFIX_ENV),
                               (settings.db_schema, SCHEMA, SCHEMA_ENV)):
        if wanted is not None and (wanted or None) != (built or None):
            raise ConfigError(f"{env}={wanted!r} was set after blobledger was imported "
                              f"(its tables are {built!r}): set it before the import")




__all__ = ["BlobLedgerError", "Ledger"]
