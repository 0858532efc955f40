"""The one clock: the database's, as SQL, shifted by a per-process offset.

Leases and ages are compared on the database's clock, never on a writer's own: two processes
whose clocks disagree (or one that slept for an hour) still agree on which lease has expired.
``db_now(seconds)`` is the database's current UTC time plus ``seconds``, as a naive UTC
timestamp like every stored one: ``now() AT TIME ZONE 'UTC'`` on PostgreSQL; on SQLite (which
runs inside this process) the same instant from SQLite's own clock. The ``seconds`` are a
bound parameter, so prebuilt statements keep their cache: a lease is ``db_now(offset +
deadline)``, an age cutoff ``db_now(offset - sweep_after)``. ``offset`` is
``BLOBLEDGER_CLOCK_OFFSET`` (tests and soaks move a process hours ahead with it).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import DateTime, Float, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.functions import FunctionElement


class db_now(FunctionElement[Any]):
    """The database's clock (naive UTC) plus a number of seconds (a SQL expression)."""

    type = DateTime()
    inherit_cache = True
    name = "db_now"


def at(param: str) -> db_now:
    """``db_now`` shifted by the seconds bound to ``param`` when the statement runs."""
    seconds: BindParameter[float] = bindparam(param, type_=Float())
    return db_now(seconds)


@compiles(db_now, "postgresql")
def _postgresql(element: db_now, compiler: Any, **kw: Any) -> str:
    (seconds,) = element.clauses
    value = compiler.process(seconds, **kw)
    return f"(now() AT TIME ZONE 'UTC') + make_interval(secs => CAST({value} AS double precision))"


@compiles(db_now, "sqlite")
def _sqlite(element: db_now, compiler: Any, **kw: Any) -> str:
    (seconds,) = element.clauses
    # SQLAlchemy stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff'; %f gives SS.SSS.
    value = compiler.process(seconds, **kw)
    sql = "strftime('%Y-%m-%d %H:%M:%f000', 'now', printf('%+.3f seconds', {}))"
    if compiler.dialect.paramstyle in ("format", "pyformat"):  # '%' is then escaped as '%%'
        sql = sql.replace("%", "%%")
    return sql.format(value)
