"""Attachments on the application's own SQLAlchemy 2 models, in the application's transaction.

    from blobledger.sqlalchemy import Attachment, has_many_attached, has_one_attached

    class Invoice(Base):
        __tablename__ = "invoices"
        id: Mapped[int] = mapped_column(primary_key=True)
        pdf: Mapped[Attachment | None] = has_one_attached()
        scans: Mapped[tuple[Attachment, ...]] = has_many_attached()

    staged = await ledger.stage(data, filename="inv.pdf", content_type="application/pdf")
    invoice.pdf = staged              # A4 in this session's flush, or the flush fails
    invoice.scans = (*invoice.scans, staged2)
    invoice.pdf = None                # detach: the old blob to the outbox, same transaction
    await session.delete(invoice)     # owner deleted: its blobs to the outbox, same transaction

The column holds a reference (JSON text: the blob's name and its metadata). On every flush of
any ``Session`` (an ``AsyncSession`` flushes through its sync session, so both are covered),
an ``after_flush`` event runs, on the flush's own connection and therefore inside the
application's transaction:

- for each new or changed attachment column, **A4** for every :class:`StagedBlob` it now holds
  (``pending -> attached`` by compare-and-set on the staging token; a loss raises
  :class:`AttachLost` and the flush, hence the transaction, fails); every plain
  :class:`Attachment` it holds must already be attached to this owner and column
  (:class:`InvalidInput` otherwise: a blob is never shared between owners); then every blob
  attached to this column that it no longer holds goes ``attached -> deleting``;
- for each deleted owner, every blob attached to it goes ``attached -> deleting``.

A detached blob's grace counts from the commit: on PostgreSQL a deferred trigger moves its
``deleting`` stamp there; on SQLite a ``before_commit`` event stamps the blobs the
transaction detached again as its last statement (:mod:`blobledger.protocol.grace`).

The events run after the owner's own UPDATE or DELETE, which locks its row: two sessions
attaching to one owner are serialised by that lock, and the second one's detach sees the
first one's attachment. A rolled-back transaction undoes A4 and the detach with the owner's
write; its staged blobs stay ``pending`` until the sweeper fences and deletes them. Reading is
:meth:`Ledger.read_attachment` (streamed) or :meth:`Ledger.open_attachment`.

The ledger's tables must live in the same database as the owner's (``Ledger`` on the
application's URL, or :meth:`Ledger.from_engine`). Owners need a primary key; tuples (not
lists mutated in place) carry a has-many value. Writes that bypass the session's unit of work
(bulk ``update()``/``delete()`` statements, raw SQL, ``ON DELETE CASCADE`` from another table)
run no event: they leave attached blobs their owner no longer holds, which ``blobledger
check`` reports (I1). This module never talks to the store and never commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Table, Text, event
from sqlalchemy import inspect as orm_inspect
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.orm import (
    MappedColumn,
    Mapper,
    Session,
    SessionTransaction,
    UOWTransaction,
    mapped_column,
)
from sqlalchemy.types import TypeDecorator

from blobledger.errors import AttachLost, InvalidInput
from blobledger.protocol.attachments import Attachment, StagedBlob, StagedUpload
from blobledger.protocol.grace import attached_names, restamp_deleting
from blobledger.protocol.owners import Owner, owner_key
from blobledger.protocol.transitions.attachments import detach_owner, sync_owner_column

__all__ = [
    "AttachLost",
    "Attachment",
    "AttachmentList",
    "AttachmentRef",
    "StagedBlob",
    "StagedUpload",
    "has_many_attached",
    "has_one_attached",
]

#: ``session.info`` key: seconds added to the database's clock by this session's steps
CLOCK_OFFSET = "blobledger.clock_offset"
#: ``session.info`` key (SQLite): the blobs this transaction detached, stamped again at commit
DETACHED = "blobledger.detached"


class AttachmentRef(TypeDecorator[Attachment]):
    """A column holding one attachment (JSON text), or NULL."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Attachment | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, Attachment):
            raise InvalidInput("an attachment column takes a staged blob or an attachment")
        return json.dumps(value.plain().to_json(), sort_keys=True)

    def process_result_value(self, value: Any, dialect: Dialect) -> Attachment | None:
        return None if value is None else Attachment.from_json(json.loads(value))


class AttachmentList(TypeDecorator[tuple[Attachment, ...]]):
    """A column holding an owner's attachments in order (a JSON list), as a tuple."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Iterable[Attachment] | None,
                           dialect: Dialect) -> str | None:
        items = list(value or ())
        if not all(isinstance(item, Attachment) for item in items):
            raise InvalidInput("an attachment list takes staged blobs or attachments")
        return json.dumps([item.plain().to_json() for item in items], sort_keys=True)

    def process_result_value(self, value: Any, dialect: Dialect) -> tuple[Attachment, ...]:
        if value is None:
            return ()
        return tuple(Attachment.from_json(item) for item in json.loads(value))


def has_one_attached(**kwargs: Any) -> MappedColumn[Any]:
    """A nullable column holding one attachment."""
    return mapped_column(AttachmentRef(), nullable=True, **kwargs)


def has_many_attached(**kwargs: Any) -> MappedColumn[Any]:
    """A column holding a tuple of attachments (empty by default); assign a new tuple."""
    return mapped_column(AttachmentList(), nullable=False, default=(), **kwargs)


# -- the session events ------------------------------------------------------------------
_columns: dict[Mapper[Any], list[tuple[str, str, str]]] = {}


def _attachment_columns(mapper: Mapper[Any]) -> list[tuple[str, str, str]]:
    """(attribute key, column name, its table's full name) of every attachment column of a
    mapper (cached)."""
    found = _columns.get(mapper)
    if found is None:
        found = [(prop.key, col.name, _fullname(col))
                 for prop in mapper.column_attrs for col in prop.columns
                 if isinstance(col.type, AttachmentRef | AttachmentList)]
        _columns[mapper] = found
    return found


def _values(value: Any) -> list[Attachment]:
    if value is None:
        return []
    if isinstance(value, Attachment):
        return [value]
    return list(value)


def _fullname(column: Any) -> str:
    """The schema-qualified name of the table a mapped column lives in."""
    table = column.table
    if not isinstance(table, Table):
        raise InvalidInput(f"attachment column {column.name!r} is not a table's column")
    return table.fullname


def _key(obj: Any, mapper: Mapper[Any]) -> str:
    identity = mapper.primary_key_from_instance(obj)
    if any(part is None for part in identity):
        raise InvalidInput(f"{mapper.class_.__name__} has no primary key yet")
    return owner_key(identity)


def sync_column(conn: Connection, owner: Owner, value: Any, offset: float = 0.0, *,
                new: bool = False) -> None:
    """Make the blob rows agree with one owner column's new value, on ``conn`` (inside the
    application's transaction): :func:`~blobledger.protocol.transitions.sync_owner_column`
    with each staged blob's token."""
    sync_owner_column(conn, owner, [
        (item.name, item.attempt if isinstance(item, StagedBlob) else None)
        for item in _values(value)], offset, new=new)


@event.listens_for(Session, "after_flush")
def _after_flush(session: Session, _context: UOWTransaction) -> None:
    work: list[tuple[Any, Mapper[Any], list[tuple[str, str, str]]]] = []
    for obj in (*session.new, *session.dirty, *session.deleted):
        mapper = orm_inspect(obj).mapper
        columns = _attachment_columns(mapper)
        if columns:
            work.append((obj, mapper, columns))
    if not work:
        return
    offset = float(session.info.get(CLOCK_OFFSET, 0.0))
    conn = session.connection()
    # SQLite: what each detach moves, stamped again before COMMIT (_before_commit)
    noted: set[str] | None = (session.info.setdefault(DETACHED, set())
                              if conn.dialect.name == "sqlite" else None)
    deleted = set(map(id, session.deleted))
    for obj, mapper, columns in work:
        if id(obj) in deleted:
            for table in sorted({table for _, _, table in columns}):
                if noted is not None:
                    noted |= attached_names(conn, table, _key(obj, mapper))
                detach_owner(conn, table, _key(obj, mapper), offset)
            continue
        state = orm_inspect(obj)
        is_new = obj in session.new
        for key, column, table in columns:
            value = getattr(obj, key)
            if (not value) if is_new else not state.attrs[key].history.has_changes():
                continue
            owner = Owner(table, _key(obj, mapper), column)
            if noted is not None and not is_new:
                noted |= attached_names(conn, table, owner.key, column) - {
                    item.name for item in _values(value)}
            sync_column(conn, owner, value, offset, new=is_new)


@event.listens_for(Session, "before_commit")
def _before_commit(session: Session) -> None:
    """SQLite (no deferred trigger): the blobs this transaction detached are stamped
    ``deleting`` again before ``COMMIT``, so that their grace counts from the commit
    (:mod:`blobledger.protocol.grace`; PostgreSQL's trigger does it there). The pending
    changes are flushed first, so the last flush's detaches are among them. A savepoint's
    release stamps them too; the outermost commit stamps them last."""
    if session.new or session.dirty or session.deleted:
        session.flush()
    names = session.info.get(DETACHED)
    if names:
        restamp_deleting(session.connection(), names,
                         float(session.info.get(CLOCK_OFFSET, 0.0)))


@event.listens_for(Session, "after_transaction_end")
def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # the outermost: committed or rolled back
        session.info.pop(DETACHED, None)
