"""The protocol's statements on Django's own connection, inside Django's transaction.

A4 and the detach steps (:mod:`blobledger.protocol.transitions`) take any connection with
``execute(statement, params)``; :class:`DjangoConnection` is one over a Django database
alias: each SQLAlchemy statement is compiled for that database's dialect (``%s``
placeholders, Django's DB-API style) and run through Django's cursor, so it commits or rolls
back (savepoints included) with the application's own writes. No statement is written here:
they all live in ``transitions``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connections
from sqlalchemy import Insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from blobledger.errors import ConfigError

_DIALECTS: dict[str, Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="format"),
    "postgresql": postgresql.psycopg.dialect(paramstyle="format"),  # type: ignore[no-untyped-call]
}


def dialect_of(alias: str) -> Dialect:
    """The SQLAlchemy dialect the ledger's statements are compiled with for a Django
    database (ConfigError for a database the ledger does not run on)."""
    vendor = connections[alias].vendor
    try:
        return _DIALECTS[vendor]
    except KeyError:
        raise ConfigError(f"database {alias!r} is {vendor}: blobledger runs on PostgreSQL "
                          "and SQLite") from None


@dataclass
class Result:
    """What a statement answered: the rows it matched or returned."""

    rowcount: int
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def scalars(self) -> list[Any]:
        return [row[0] for row in self.rows]

    def all(self) -> list[tuple[Any, ...]]:
        return list(self.rows)


class DjangoConnection:
    """A Django database alias seen as the connection the protocol's steps expect."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.dialect = dialect_of(alias)

    def execute(self, statement: ClauseElement,
                params: Mapping[str, Any] | None = None) -> Result:
        # an INSERT's values come with the parameters (as SQLAlchemy's execute would say)
        keys = list(params or {}) if isinstance(statement, Insert) else None
        compiled = cast(SQLCompiler, statement.compile(dialect=self.dialect, column_keys=keys))
        state = compiled.construct_expanded_state(dict(params or {}))
        processors: Mapping[str, Any] = state.processors
        args = [processors[key](state.parameters[key]) if key in processors
                else state.parameters[key] for key in state.positiontup or ()]
        with connections[self.alias].cursor() as cursor:
            cursor.execute(state.statement, args)
            rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
            return Result(cursor.rowcount, rows)
