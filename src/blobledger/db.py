"""Database access: URL normalisation, engines, sessions and migrations, in one place.

``sqlite:///path`` and ``postgresql://…`` are accepted as users write them; the driver
(aiosqlite, asyncpg) is chosen here. SQLite runs in WAL mode with a busy timeout; a transaction
that may write starts with ``BEGIN IMMEDIATE`` so two writers queue instead of deadlocking (a
deferred transaction that reads and then writes fails with SQLITE_BUSY instead of waiting),
and a read-only one (``readonly=True``: execution option :data:`READ_ONLY`) with a plain
``BEGIN``, which takes no write lock: in WAL mode it reads beside an open writer.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from sqlalchemy import event, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DataError, DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import PoolResetState
from sqlalchemy.sql import ClauseElement
from sqlalchemy.util import await_only, greenlet_spawn

from blobledger.errors import AccessRefused, ConfigError, DatabaseMissing, DatabaseUnavailable

#: the version table of a ledger whose tables live in an application's database
EMBEDDED_VERSION_TABLE = "blobledger_version"
#: the execution option that makes a SQLite transaction a plain (deferred) ``BEGIN``: for
#: transactions that only read (an application may set it on its own read-only engine:
#: ``engine.execution_options(blobledger_read_only=True)``)
READ_ONLY = "blobledger_read_only"
#: SQLSTATE invalid_catalog_name: the server answers, the database does not exist
MISSING_DATABASE = "3D000"
#: SQLSTATE class 28: invalid authorization (no such role, a wrong password)
REFUSED_AUTHORIZATION = "28"
T = TypeVar("T")

_DRIVERS = {
    "sqlite": "sqlite+aiosqlite",
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "sqlite+pysqlite": "sqlite+aiosqlite",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgresql+psycopg": "postgresql+asyncpg",
    "postgresql+psycopg2": "postgresql+asyncpg",
}


def normalise_url(url: str) -> URL:
    """The async-driver URL for a user's database URL; ConfigError if unsupported."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"BLOBLEDGER_DATABASE_URL is not a database URL: {url!r}") from exc
    driver = _DRIVERS.get(parsed.drivername)
    if driver is None:
        raise ConfigError(
            f"unsupported database {parsed.drivername!r}: use sqlite:///… or postgresql://…"
        )
    if driver == "postgresql+asyncpg" and not _installed("asyncpg"):
        # the line blobledger._base.extras gives where the settings are checked (this layer
        # is below it): a Ledger opened on a URL directly is refused alike
        raise ConfigError("a postgresql:// database needs the postgresql extra: "
                          "pip install 'blobledger[postgresql]'")
    return parsed.set(drivername=driver)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def create_engine(url: str, *, create: bool = True) -> AsyncEngine:
    """An engine for the URL; for SQLite the file's folder is created (``create`` False:
    a SQLite file that does not exist is a ConfigError naming it, and nothing is made)."""
    parsed = normalise_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.drivername.startswith("sqlite"):
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            path = Path(database).expanduser()
            if not create and not path.is_file():
                raise DatabaseMissing(f"database {redacted(url)} does not exist (no file "
                                      f"{path.absolute()}); set BLOBLEDGER_DATABASE_URL to "
                                      "the database in use")
            path.parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": 30}
        # no rollback at checkin unless a transaction is open (_reset_sqlite): on aiosqlite
        # every driver call is a trip to the connection's thread, and a checkin follows a
        # COMMIT nearly always
        kwargs["pool_reset_on_return"] = None
        # a statement in one trip to aiosqlite's thread, not three or four
        from blobledger import sqlite_driver

        adapted = sqlite_driver.dbapi()
        if adapted is not None:
            kwargs["module"] = adapted
    else:
        # no pre-ping (a round trip per checkout): a pooled connection that died is found by
        # the transaction's own BEGIN, and replaced once (Database.transaction)
        kwargs.update(pool_size=10, max_overflow=20)
    engine = create_async_engine(parsed, **kwargs)
    if parsed.drivername.startswith("sqlite"):
        _configure_sqlite(engine)
        event.listen(engine.sync_engine, "reset", _reset_sqlite)
    return engine


def _reset_sqlite(dbapi_conn: Any, _record: Any, state: PoolResetState) -> None:
    """A SQLite connection back in the pool: rolled back if a transaction is still open on
    it (an error left it so), as the pool's reset would; not otherwise (``ROLLBACK`` with
    none open does nothing, but costs aiosqlite a trip to its thread). A driver that does
    not say whether it is in a transaction is rolled back."""
    if not state.asyncio_safe:  # garbage-collected outside the loop: no I/O (as the pool)
        return
    if getattr(getattr(dbapi_conn, "_connection", None), "in_transaction", True):
        dbapi_conn.rollback()


def configure_sqlite(engine: AsyncEngine) -> None:
    """WAL, a busy timeout and ``BEGIN IMMEDIATE`` on every connection of a SQLite engine
    (what the ledger's own engines get; for an application's engine shared with it), except
    for read-only transactions (:data:`READ_ONLY`), which begin deferred."""
    _configure_sqlite(engine)


def _configure_sqlite(engine: AsyncEngine) -> None:
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY)
                             else "BEGIN IMMEDIATE")


class Database:
    """The engine and the one way to open a session (``async with db.session() as s``)."""

    def __init__(self, url: str, *, engine: AsyncEngine | None = None,
                 create: bool = True) -> None:
        """``create`` False: a SQLite database that does not exist is a ConfigError (for
        commands that only inspect a database), not a new empty file."""
        self.url = url
        self.engine = engine if engine is not None else create_engine(url, create=create)
        self._owns_engine = engine is None
        #: Alembic's version table: the ledger's own on the application's engine
        self.version_table = "alembic_version" if engine is None else EMBEDDED_VERSION_TABLE
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        #: the same pool, for transactions that only read (no write lock on SQLite)
        self._reader = self.engine.execution_options(**{READ_ONLY: True})
        self._read_sessions = async_sessionmaker(self._reader, expire_on_commit=False)
        #: the same pool in autocommit, for the one-statement steps on PostgreSQL when the
        #: engine's execution is observed (:meth:`observed`)
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        #: the runs of one-statement steps sent on the driver itself (:meth:`_on_driver`),
        #: not through a SQLAlchemy connection: a batch of n runs counts n
        self.driver_runs = 0

    @classmethod
    def from_engine(cls, engine: AsyncEngine) -> Database:
        """The application's own async engine (its pool, its credentials): the ledger's tables
        then live in the application's database, so attachments commit with its rows. The
        engine stays the application's (``dispose`` leaves it alone). On SQLite, configure it
        with :func:`configure_sqlite` first (WAL, busy timeout, ``BEGIN IMMEDIATE`` for all
        but read-only transactions)."""
        url = engine.url.render_as_string(hide_password=False)
        return cls(url, engine=engine)

    @property
    def is_sqlite(self) -> bool:
        return is_sqlite(self.engine)

    @asynccontextmanager
    async def session(self, *, readonly: bool = False) -> AsyncIterator[AsyncSession]:
        """A session in one transaction: committed on success, rolled back on error.
        ``readonly``: it only reads (on SQLite a plain ``BEGIN``, no write lock)."""
        if self.is_sqlite:
            sessions = self._read_sessions if readonly else self._sessions
            async with sessions() as session, session.begin():
                yield session
            return
        # the session joins the transaction begun (and committed) by ``transaction``
        async with self.transaction(readonly=readonly) as conn, AsyncSession(
                bind=conn, expire_on_commit=False,
                join_transaction_mode="rollback_only") as session, session.begin():
            yield session

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[AsyncConnection]:
        """A bare connection in one transaction, for prebuilt Core statements on hot paths.
        ``readonly``: it only reads (on SQLite a plain ``BEGIN``, no write lock); a
        transaction that may write must not say so, or it could fail busy instead of
        queueing.

        PostgreSQL: the pool does not ping a connection it hands out. The transaction's BEGIN
        (which the driver sends before the first statement anyway) is sent here, before the
        caller's statements; if it finds the connection gone, nothing of the transaction
        reached the server, and it is begun once more on a fresh connection. Nothing else is
        run again: a statement or a COMMIT that fails raises to the caller."""
        engine = self._reader if readonly else self.engine
        if self.is_sqlite:
            async with engine.begin() as conn:
                yield conn
            return
        conn = await engine.connect()
        try:
            if not await _begin_now(conn):  # the pooled connection was gone: once more
                await conn.close()
                conn = await engine.connect()
            async with conn.begin():
                yield conn
        finally:
            await conn.close()

    @property
    def single_statements(self) -> bool:
        """Whether a step may run as one autocommit statement (:meth:`fetch_one`): on
        PostgreSQL. SQLite keeps its transactions (no round trips to save, and its
        ``BEGIN IMMEDIATE`` is what queues its writers)."""
        return not self.is_sqlite

    def observed(self) -> bool:
        """Whether the engine's execution has listeners, so that a one-statement step must go
        through a SQLAlchemy :class:`Connection` for them to see it: any
        :class:`~sqlalchemy.events.ConnectionEvents` listener on the engine or its class
        (``before_cursor_execute``, ``after_cursor_execute``, ``before_execute``, ``begin``
        ...: SQLAlchemy then marks the engine ``_has_events``), or one of the dialect's
        execution events (``handle_error``, ``do_execute``, ``do_executemany``,
        ``do_execute_no_params``). OpenTelemetry's SQLAlchemy instrumentation
        (:func:`blobledger.telemetry.instrument_engine`) adds the first kind and
        ``handle_error``. A dialect listener of another event (``do_connect``, a token on
        each new connection) or the pool's events (``connect``, ``checkout``: the driver's
        path takes its connection from the same pool, and they run) leave the driver's path.
        The ledger's own engines have none on PostgreSQL (its ``begin`` and ``connect``
        listeners are SQLite's). Asked at each step: a listener added later counts; one
        removed no longer does (SQLAlchemy keeps its mark of an engine that had listeners,
        so the engine's event lists themselves are asked then)."""
        sync = self.engine.sync_engine
        if sync._has_events:
            engine_events: Any = sync.dispatch
            if any(getattr(engine_events, name) for name in engine_events._event_names):
                return True
        dialect = sync.dialect
        if not dialect._has_events:
            return False
        dispatch: Any = dialect.dispatch
        return bool(dispatch.handle_error or dispatch.do_execute or dispatch.do_executemany
                    or dispatch.do_execute_no_params)

    async def fetch_one(self, statement: ClauseElement,
                        params: dict[str, Any]) -> SimpleNamespace | None:
        """``statement`` run once (PostgreSQL), in autocommit, for a step that is one
        statement: it commits as it runs, in one round trip (no BEGIN, no COMMIT). Its first
        row with attribute access, or None. A connection lost under it leaves the step's
        outcome unknown, as a lost COMMIT does: the caller decides whether it may run again
        (``blobledger.protocol.single``).

        Sent on the driver (:meth:`_on_driver`), compiled once from the expression
        (:func:`_positional`), unless the engine's execution is :meth:`observed`: what a step
        costs through a SQLAlchemy connection and its result, above the round trip, is
        saved. Observed, it runs through a SQLAlchemy connection in autocommit (the same
        statement, on the same pool), so that its events see it: OpenTelemetry's statement
        span under the step's, an application's ``before_cursor_execute``. Errors the same on
        both paths, as a statement's: a :class:`DBAPIError` (an
        :class:`~sqlalchemy.exc.IntegrityError` for a refused key), ``connection_invalidated``
        if the connection went away under it (it may or may not have applied)."""
        if self.observed():
            async with self._autocommit.connect() as conn:
                result = await conn.execute(statement, params)  # type: ignore[call-overload]
                row = result.first() if result.returns_rows else None
            return None if row is None else SimpleNamespace(**row._asdict())
        sql, args = _positional(statement, self.engine.dialect, (params,))
        record = await self._on_driver(sql, lambda driver: driver.fetchrow(sql, *args[0]))
        self.driver_runs += 1
        return None if record is None else SimpleNamespace(**dict(record.items()))

    async def fetch_each(self, statement: ClauseElement,
                         params: Sequence[dict[str, Any]]) -> list[SimpleNamespace]:
        """``statement`` run once per parameter set in one round trip (PostgreSQL): asyncpg's
        pipelined ``fetchmany``, one implicit transaction, so every run applies or none does.
        The rows of all runs in one list (each row must tell its run apart), with attribute
        access. Errors as :meth:`fetch_one`'s.

        The batch is the driver's call either way (SQLAlchemy has no executemany that returns
        rows of a statement that is not an INSERT). When the engine's execution is
        :meth:`observed`, it is sent inside a SQLAlchemy connection in autocommit, under the
        events SQLAlchemy runs around one ``executemany`` (:func:`_pipelined`):
        ``before_cursor_execute`` (a listener that returns a statement changes what is sent,
        as SQLAlchemy's ``retval`` allows), ``after_cursor_execute``, ``handle_error``, each
        once for the batch, with ``executemany`` true and every run's parameters; the
        dialect's ``do_executemany`` is not run (the call is asyncpg's ``fetchmany``, not the
        cursor's ``executemany``)."""
        if self.observed():
            async with self._autocommit.connect() as conn:
                records = await conn.run_sync(_pipelined, statement, list(params))
        else:
            sql, args = _positional(statement, self.engine.dialect, params)
            records = await self._on_driver(sql, lambda driver: driver.fetchmany(sql, args))
            self.driver_runs += len(args)
        return [SimpleNamespace(**dict(record.items())) for record in records]

    async def _on_driver(self, sql: str, call: Callable[[Any], Awaitable[T]]) -> T:
        """``call`` on the asyncpg connection of a connection taken from the engine's pool
        itself (no SQLAlchemy :class:`Connection` around it: its checkout and checkin are
        what a one-statement step spent most on, beside the round trip), for one statement
        outside any transaction (asyncpg's implicit one: autocommit). The pool is the same
        one, with its events, its limits and its invalidation; the connection goes back to
        it after the call (its reset rolls back nothing: no transaction is open).

        Errors as SQLAlchemy's :class:`Connection` raises them: a failed checkout as its
        connect does; the driver's error translated by the adapter and wrapped as a
        :class:`DBAPIError` (``connection_invalidated`` on a disconnect, after which this
        connection is discarded and every one the pool made before now is replaced at its
        checkout); a cancelled call discards its connection (its statement's state on the
        wire is unknown), as SQLAlchemy does. The engine's execution events (``handle_error``,
        ``before_cursor_execute``) are not run: only for an engine whose execution is not
        :meth:`observed`."""
        sync = self.engine.sync_engine
        dialect = sync.dialect
        try:
            fairy = await greenlet_spawn(sync.raw_connection)
        except dialect.loaded_dbapi.Error as exc:  # as Connection() wraps its connect's
            Connection._handle_dbapi_exception_noconnection(exc, dialect, sync)
        adapted: Any = fairy.dbapi_connection
        discarded = False
        try:
            try:
                if getattr(adapted, "_transaction", None) is not None:
                    # a transaction left open by an engine without reset on return: ended,
                    # as setting the connection to autocommit would
                    await greenlet_spawn(adapted.rollback)
                return await _adapted_call(adapted, call)
            except Exception as exc:
                lost = dialect.is_disconnect(exc, adapted, None)  # type: ignore[arg-type]
                if lost:  # as SQLAlchemy does on a disconnect under a statement
                    sync.pool._invalidate(fairy, exc, _checkin=False)
                    discarded = True
                    await greenlet_spawn(fairy.invalidate, exc)
                raise DBAPIError.instance(sql, None, exc, dialect.loaded_dbapi.Error,
                                          connection_invalidated=lost) from exc
            except BaseException as exc:  # cancelled under the statement
                discarded = True
                await asyncio.shield(greenlet_spawn(fairy.invalidate, exc))
                raise
        finally:
            if not discarded:
                await greenlet_spawn(fairy.close)

    async def ping(self) -> None:
        """Raise DatabaseUnavailable if the database cannot be reached (a malformed URL is a
        ConfigError already, when the engine is made); DatabaseMissing or AccessRefused (both
        ConfigErrors) if it answers that the database or the role does not exist."""
        try:
            # SQLite: no write lock; PostgreSQL: a dead pooled connection is replaced
            async with self.transaction(readonly=True) as conn:
                await conn.execute(text("SELECT 1"))
        except (TimeoutError, OSError, DBAPIError, OperationalError) as exc:
            if _sqlstate(exc) == MISSING_DATABASE:
                name = self.engine.url.database or ""
                raise DatabaseMissing(
                    f"database {name!r} does not exist on the server of "
                    f"{redacted(self.url)}: create it (createdb {name}, or CREATE DATABASE "
                    f"\"{name}\") or set BLOBLEDGER_DATABASE_URL to an existing one") from exc
            reason = _first_line(exc)
            if (_sqlstate(exc) or "").startswith(REFUSED_AUTHORIZATION):
                raise AccessRefused(
                    f"database {redacted(self.url)} refused the credentials: {reason}; set "
                    "BLOBLEDGER_DATABASE_URL to a role and password it accepts") from exc
            raise DatabaseUnavailable(
                f"database unreachable ({redacted(self.url)}): {reason}") from exc

    async def dispose(self) -> None:
        if self._owns_engine:
            await self.engine.dispose()


async def _begin_now(conn: AsyncConnection) -> bool:
    """Send the transaction's BEGIN on a PostgreSQL connection just checked out (asyncpg's
    adapter otherwise sends it before the first statement): True if begun, False if the
    connection was found gone (it is invalidated, and so is every connection the pool held
    before now, as SQLAlchemy does on any disconnect; nothing was run). Another error raises,
    as a :class:`DBAPIError`. An adapter without this step (another driver) begins as
    usual, at the first statement."""
    fairy = await conn.get_raw_connection()
    adapted = fairy.dbapi_connection
    start = getattr(adapted, "_start_transaction", None)
    if start is None or getattr(adapted, "_transaction", None) is not None:
        return True
    try:
        await start()
    except Exception as exc:
        dialect = conn.dialect
        if dialect.is_disconnect(exc, adapted, None):  # type: ignore[arg-type]
            # what SQLAlchemy does on a disconnect under a statement: the connections the
            # pool made before now are replaced at their checkout, this one at once
            conn.sync_engine.pool._invalidate(fairy, exc, _checkin=False)
            await conn.invalidate(exc)
            return False
        await conn.invalidate(exc)
        raise DBAPIError.instance("BEGIN", None, exc, dialect.loaded_dbapi.Error) from exc
    return True


def _compiled(statement: ClauseElement, dialect: Any) -> Any:
    """The statement compiled for ``dialect``, once per statement."""
    compiled = _COMPILED.get((id(statement), dialect.name))
    if compiled is None or compiled[0] is not statement:
        compiled = (statement, statement.compile(dialect=dialect))
        _COMPILED[(id(statement), dialect.name)] = compiled
    return compiled[1]


def _positional(statement: ClauseElement, dialect: Any, params: Sequence[dict[str, Any]]
                ) -> tuple[str, list[list[Any]]]:
    """The statement's text for ``dialect`` (compiled once per statement) and each
    parameter set as the driver's positional arguments, through the types' bind processors."""
    done = _compiled(statement, dialect)
    order = done.positiontup or []
    processors = done._bind_processors
    args = []
    for one in params:
        values = done.construct_params(one)
        args.append([processors[key](values[key]) if key in processors else values[key]
                     for key in order])
    return done.string, args


def _pipelined(conn: Connection, statement: ClauseElement,
               params: list[dict[str, Any]]) -> list[Any]:
    """``statement`` once per parameter set on ``conn``'s asyncpg connection, pipelined
    (``fetchmany``: one round trip), under the events SQLAlchemy runs around one
    ``executemany`` on this connection: ``before_cursor_execute`` (its listeners may return
    another statement, as with ``retval``), ``after_cursor_execute``, and on an error
    ``handle_error`` with SQLAlchemy's own handling (the error wrapped as a
    :class:`DBAPIError`; a disconnect invalidates the connection and the pool's older ones,
    ``connection_invalidated``). The execution context is the one SQLAlchemy makes for the
    compiled statement and these parameters (the same SQL and positional arguments as
    :func:`_positional`'s). Run in the connection's greenlet (``run_sync``)."""
    dialect: Any = conn.dialect
    if conn._transaction is None:  # as an execute begins (autocommit: nothing is sent)
        conn._autobegin()
    fairy = conn.connection
    context: Any = dialect.execution_ctx_cls._init_compiled(
        dialect, conn, fairy, conn.get_execution_options(), _compiled(statement, dialect),
        params, statement, None)
    cursor = context.cursor
    sql: str = context.statement
    args: Any = context.parameters
    adapted: Any = fairy.dbapi_connection

    try:
        try:
            for listener in conn.dispatch.before_cursor_execute:
                sql, args = listener(conn, cursor, sql, args, context, True)
            records = list(await_only(_adapted_call(
                adapted, lambda driver: driver.fetchmany(sql, args))))
            conn.dispatch.after_cursor_execute(conn, cursor, sql, args, context, True)
        except BaseException as exc:
            conn._handle_dbapi_exception(exc, sql, args, cursor, context)
    finally:
        cursor.close()
    return records


async def _adapted_call(adapted: Any, call: Callable[[Any], Awaitable[T]]) -> T:
    """``call`` on the asyncpg connection under SQLAlchemy's adapter, holding the adapter's
    lock as its own calls do; the driver's error raised as the adapter translates it."""
    async with adapted._execute_mutex:
        try:
            return await call(adapted._connection)
        except Exception as exc:
            adapted._handle_exception(exc)  # raises the adapter's own error
            raise


#: :func:`_positional`'s compilations: (id of the statement, dialect) -> (it, compiled)
_COMPILED: dict[tuple[int, str], tuple[ClauseElement, Any]] = {}


def connection_lost(exc: BaseException) -> bool:
    """Whether a database error says the connection went away under the statement (SQLAlchemy
    invalidated it): a transaction whose COMMIT was under way may or may not have applied,
    and the caller cannot tell from the error."""
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


async def once_more_if_lost(step: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
    """Run one compare-and-set transaction; if its connection was lost under it (its COMMIT
    may have applied), run it once more, on a fresh connection. The result, and whether it
    is the second run's.

    Only for a step whose condition makes the second run harmless: if the first applied, the
    second loses (or changes nothing), and the caller then recognises its own first result
    (the document this attempt made ready; the version it wrote). The second run's row
    locks wait for the first transaction to end on the server, so it never runs beside it.
    Never for an insert (a second run would collide with its own first), nor blindly."""
    try:
        return await step(), False
    except DBAPIError as exc:
        if not connection_lost(exc):
            raise
    return await step(), True


def refused_value(exc: BaseException) -> bool:
    """Whether the database refused a value of the request (SQLSTATE class 22, e.g. a NUL in
    a PostgreSQL string): the request's fault, not an outage."""
    if isinstance(exc, DataError):
        return True
    if isinstance(exc, DBAPIError):
        code = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        return isinstance(code, str) and code.startswith("22")
    return False


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver's error (asyncpg's ``sqlstate``), if it has one."""
    original = getattr(exc, "orig", None) or exc
    for candidate in (original, getattr(original, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def _first_line(exc: BaseException) -> str:
    text_ = str(exc).strip().splitlines()
    return text_[0] if text_ else type(exc).__name__


def redacted(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable url>"
