"""SQLite for the simulation: real SQLite (a file in WAL mode, the ledger's own engine and
statements), run on the loop's thread instead of aiosqlite's worker threads, so no result
arrives in an order the seed does not decide.

Every statement is an ``await`` (``point``: a preemption, pause and crash point named
``db``). SQLite's own busy wait (a ``BEGIN IMMEDIATE`` while another connection writes) would
block the loop's thread: the busy timeout is 0 here and a locked database is retried after a
virtual backoff, up to the 30 s the ledger configures, after which the error is raised as
SQLite would. The database's clock (``db_now``) is the loop's virtual clock: a SQL function
``sim_now`` replaces SQLite's ``'now'`` while a simulation runs (:func:`sim_clock`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite
from sqlalchemy.ext.compiler import compiles

from blobledger.db import Database
from blobledger.protocol import clock
from blobledger.protocol.migrate import migrate_database

#: the virtual clock's zero, as the database's UTC
EPOCH = datetime(2030, 1, 1)
BUSY_TIMEOUT = 30.0

_active: dict[str, Any] = {}
#: the connections in use, for :func:`release`
OPEN: set[SimConnection] = set()
#: :func:`release` of the connections of finished tasks only
DEAD: Any = object()


_TEMPLATE: dict[str, Path] = {}


def template() -> Path:
    """A migrated database, copied for every run (made once per process)."""
    if "path" not in _TEMPLATE:
        root = Path(tempfile.mkdtemp(prefix="blobledger-sim-"))
        path = root / "template.db"

        async def make() -> None:
            db = Database(f"sqlite:///{path}")
            try:
                await migrate_database(db)
            finally:
                await db.dispose()

        asyncio.run(make())
        _TEMPLATE["path"] = path
    return _TEMPLATE["path"]


def release(task: asyncio.Task[Any] | None) -> int:
    """A crashed task's connections as its process's death leaves them: a transaction it
    left open (its clean-up was itself interrupted) is rolled back, the connection closed.
    ``None``: every connection's (once every actor has finished). A connection whose last
    user has finished with its transaction still open is released too (it is a crashed
    task's, whose clean-up ran in a task of SQLAlchemy's own)."""
    released = 0
    for conn in list(OPEN):
        owner = getattr(conn, "owner", None)
        dead = owner is not None and owner.done()
        mine = task is None or dead or (task is not DEAD and owner is task)
        if mine and conn._connection is not None:
            # a statement left unfinished (rows of an INSERT ... RETURNING never fetched)
            # holds its implicit transaction's lock until its cursor is closed
            for cursor in list(conn.cursors):
                cursor.close()
            conn.cursors.clear()
            if conn._connection.in_transaction:
                conn._connection.rollback()
                conn.stop()
                released += 1
            OPEN.discard(conn)
    return released


async def _nothing(point: str) -> None:
    return None


class SimConnection(aiosqlite.Connection):
    """aiosqlite's connection, its functions run on the loop's thread."""

    def __init__(self, connector: Callable[[], sqlite3.Connection], iter_chunk_size: int,
                 point: Callable[[str], Awaitable[None]],
                 drop: Callable[[str], str | None]) -> None:
        super().__init__(connector, iter_chunk_size)
        self._point = point
        self._drop = drop
        self.cursors: weakref.WeakSet[sqlite3.Cursor] = weakref.WeakSet()
        self._tx = _Inline()  # type: ignore[assignment]  # SQLAlchemy queues to it directly

    def __await__(self) -> Any:
        return self._connect().__await__()

    async def _connect(self) -> SimConnection:
        if self._connection is None:
            self._connection = self._connector()
            self._connection.create_function("sim_now", 1, _sim_now)
        return self

    async def _execute(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        if args and isinstance(args[0], str) and "busy_timeout" in args[0]:
            args = ("PRAGMA busy_timeout=0", *args[1:])
        await self._point("db")
        self.owner = asyncio.current_task()
        OPEN.add(self)
        cursor = getattr(fn, "__self__", None)
        if isinstance(cursor, sqlite3.Cursor):
            self.cursors.add(cursor)
        if (lost := self._drop(getattr(fn, "__name__", ""))) is not None:
            self._lose(fn, lost)
        waited, backoff = 0.0, 0.001
        while True:
            try:
                return partial(fn, *args, **kwargs)()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or waited >= BUSY_TIMEOUT:
                    raise
            if waited == 0.0:
                release(DEAD)  # a dead task's open transaction: its lock goes with it
            await asyncio.sleep(backoff)
            waited += backoff
            backoff = min(backoff * 2, 1.0)

    def _lose(self, fn: Any, outcome: str) -> None:
        """The connection lost under this call (``outcome`` says how): a COMMIT that
        ``applied`` or did not, a statement that never ran; the transaction is over either
        way, and the error is the one SQLAlchemy takes for a lost connection."""
        assert self._connection is not None
        if outcome == "applied":
            self._connection.commit()
        elif self._connection.in_transaction:
            self._connection.rollback()
        raise sqlite3.OperationalError(f"connection closed (simulated: {outcome} at "
                                       f"{getattr(fn, '__name__', 'a call')})")

    def stop(self) -> asyncio.Future[Any] | None:
        OPEN.discard(self)
        self._running = False
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        return None


class _Inline:
    """aiosqlite's queue to its thread, run at once on the loop's thread."""

    def put_nowait(self, item: tuple[asyncio.Future[Any] | None, Callable[[], Any]]) -> None:
        future, function = item
        try:
            result = function()
        except BaseException as exc:
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(result)


def _sim_now(seconds: float) -> str:
    loop = asyncio.get_running_loop()
    value = EPOCH + timedelta(seconds=loop.time() + float(seconds or 0))
    return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}000"


_original = clock._sqlite


@compiles(clock.db_now, "sqlite")
def _sqlite(element: clock.db_now, compiler: Any, **kw: Any) -> str:
    if not _active:
        return _original(element, compiler, **kw)
    (seconds,) = element.clauses
    return f"sim_now({compiler.process(seconds, **kw)})"


def _kept(call: str) -> str | None:
    return None


@contextlib.contextmanager
def sim_clock(point: Callable[[str], Awaitable[None]] = _nothing,
              drop: Callable[[str], str | None] = _kept) -> Iterator[None]:
    """While it is open, aiosqlite connections run on the loop's thread and SQLite's clock
    is the loop's (new engines only: a compiled statement is cached per engine). ``drop``
    is asked at every call (``commit``, ``execute``, ...) whether the connection is lost
    under it: None, or how (``applied``: a COMMIT that applied; anything else: nothing of
    the transaction applied)."""
    original = aiosqlite.connect

    def connect(database: Any, *, iter_chunk_size: int = 64, **kwargs: Any) -> SimConnection:
        kwargs["timeout"] = 0

        def connector() -> sqlite3.Connection:
            connection: sqlite3.Connection = sqlite3.connect(str(database), **kwargs)
            return connection

        return SimConnection(connector, iter_chunk_size, point, drop)

    OPEN.clear()
    _active["on"] = True
    aiosqlite.connect = connect
    try:
        yield
    finally:
        aiosqlite.connect = original
        _active.clear()
