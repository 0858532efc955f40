"""An attachment's owner as the database sees it: does the owner row still hold a blob?

The deletion path (its guard) and ``blobledger check`` ask this of the application's own
tables, which blobledger knows only by the names A4 recorded (``owner_table``, ``owner_key``,
``owner_column``). The table is reflected once per engine; the key is the primary key as text
(one column: its value; several: a JSON list of their values, in primary-key order). The
column holds the reference written by :mod:`blobledger.sqlalchemy` (JSON text naming the blob),
so "holds" is "the column's text contains the blob's name": blob names are unique and never
reused. This module only reads; it never writes the application's tables.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import MetaData, Table, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import NoSuchTableError


@dataclass(frozen=True)
class Owner:
    """Who an attachment belongs to: a row of the application (table, primary key as text)
    and the column that holds the reference."""

    table: str
    key: str
    column: str


_tables: dict[tuple[str, str], Table] = {}  # by database URL and table name
#: how the owner column of a document version's variant begins
#: (:mod:`blobledger.protocol.variant_owner`): no owner row names such a blob, the
#: ``attached`` state alone holds it
VARIANT_COLUMN = "variant:"


def owner_key(values: tuple[Any, ...] | list[Any]) -> str:
    """The text form of a primary key, as A4 records it."""
    if len(values) == 1:
        return str(values[0])
    return json.dumps([str(v) for v in values])


def owner_holds(conn: Connection, owner: Owner, blob_name: str) -> bool:
    """True if the owner row exists and its column still names ``blob_name`` (a sync
    function: ``await conn.run_sync(owner_holds, owner, name)``). A table or row that is gone
    holds nothing; nor does a document version hold its variants (its row names none: only
    their ``attached`` state does)."""
    if owner.column.startswith(VARIANT_COLUMN):
        return False
    value = owner_value(conn, owner)
    return value is not None and blob_name in value


def owner_value(conn: Connection, owner: Owner) -> str | None:
    """The owner column's value as text; None if the table, the row or the value is gone."""
    table = _reflect(conn, owner.table)
    if table is not None and owner.column not in table.c:  # migrated since: look again
        table = _reflect(conn, owner.table, fresh=True)
    if table is None or owner.column not in table.c:
        return None
    pk = list(table.primary_key.columns)
    parts = [owner.key] if len(pk) == 1 else list(json.loads(owner.key))
    if len(parts) != len(pk):
        return None
    where = [col == _coerce(col, part) for col, part in zip(pk, parts, strict=True)]
    value = conn.execute(select(table.c[owner.column]).where(*where)).scalar_one_or_none()
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def _coerce(column: Any, text: str) -> Any:
    """A primary key's text form back as the column's Python type (int, UUID, else text)."""
    try:
        python_type = column.type.python_type
    except NotImplementedError:
        return text
    if python_type is int or python_type is uuid.UUID:
        return python_type(text)
    return text


def _reflect(conn: Connection, name: str, *, fresh: bool = False) -> Table | None:
    key = (conn.engine.url.render_as_string(hide_password=True), name)
    table = None if fresh else _tables.get(key)
    if table is None:
        schema, _, bare = name.rpartition(".")
        try:
            table = Table(bare, MetaData(), schema=schema or None, autoload_with=conn)
        except NoSuchTableError:
            return None
        _tables[key] = table
    return table
