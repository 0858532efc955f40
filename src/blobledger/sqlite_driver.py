"""aiosqlite, adapted so that a statement is one trip to the connection's thread.

aiosqlite runs every call into ``sqlite3`` on the connection's own thread, and each call is a
trip there and back (a queue, a future, the event loop woken through its self-pipe).
SQLAlchemy's adapter makes a statement three or four of them: a cursor, the statement, its
rows, the cursor's close. Here the four happen in one call on the thread: the statement runs
and its rows, its description, its row count and last row id are brought back together, the
cursor closed before the call returns (so no unfinished statement ever holds a lock). What the
statement does, its transaction and its errors are those of ``sqlite3``, unchanged: only the
number of trips changes (a create on SQLite made 24 of them, it makes 9).

The ledger's own SQLite engines use it (:func:`blobledger.db.create_engine`) where the installed
SQLAlchemy adapts aiosqlite as 2.1 does (:data:`ADAPTABLE`; an older one keeps its stock
driver); an application's engine given to ``Database.from_engine`` keeps its own driver.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT

#: what one trip brings back: the description, the row count, the last row id, the rows
_Outcome = tuple[Any, int, int | None, list[Any] | None]


def _run(operation: str, parameters: Any, many: bool,
         connection: aiosqlite.Connection) -> _Outcome:
    """On the connection's thread: the statement, its rows and its cursor's close. The
    operation comes first, as aiosqlite's own calls pass their SQL."""
    cursor: sqlite3.Cursor = connection._conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        rows = cursor.fetchall() if cursor.description else None
        return cursor.description, cursor.rowcount, cursor.lastrowid, rows
    finally:
        cursor.close()


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A client-side cursor that holds no driver cursor: each statement is one trip."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: Any) -> None:  # no trip: no driver cursor yet
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        """Nothing to close: the driver's cursor was closed on the thread."""

    def close(self) -> None:
        self._rows.clear()

    async def _execute_async(self, operation: Any, parameters: Any) -> Any:
        await self._trip(operation, parameters, False)
        return self

    async def _executemany_async(self, operation: Any,
                                 seq_of_parameters: Sequence[Any]) -> Any:
        await self._trip(operation, seq_of_parameters, True)
        return self

    async def _trip(self, operation: Any, parameters: Any, many: bool) -> None:
        async with self._adapt_connection._execute_mutex:
            description, count, last, rows = await self._connection._execute(
                _run, operation, parameters, many, self._connection)
        self._description, self._rowcount, self._lastrowid = description, count, last
        self._rows = collections.deque(rows or ())


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    """SQLAlchemy's aiosqlite connection with :class:`OneTripCursor` for its cursors."""

    __slots__ = ()
    _cursor_cls = OneTripCursor


class OneTripDBAPI(AsyncAdapt_aiosqlite_dbapi):
    """The aiosqlite module as SQLAlchemy adapts it, its connections :class:`OneTripConnection`
    (``create_async_engine(..., module=dbapi())``)."""

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        adapted = super().connect(*arg, **kw)
        adapted.__class__ = OneTripConnection  # the same slots: only the cursors' class
        return adapted  # type: ignore[return-value]


#: whether the installed SQLAlchemy adapts aiosqlite as this module builds on (2.1's shared
#: asyncio cursor: a statement through ``_execute_async``); an older one keeps its own driver
ADAPTABLE = all(hasattr(AsyncAdapt_aiosqlite_cursor, attribute)
                for attribute in ("_execute_async", "_executemany_async", "_async_soft_close"))


def dbapi() -> OneTripDBAPI | None:
    """The adapted module for ``create_async_engine(module=...)``; None where the installed
    SQLAlchemy's adapter is not the one this module builds on (its stock driver then)."""
    return OneTripDBAPI(aiosqlite, sqlite3) if ADAPTABLE else None
