"""The endpoint's own rows (migration 0013): a multipart upload's parts (``s3_parts``) and
the user metadata and canned ACL of a blob written through the endpoint (``s3_objects``,
keyed by the blob's name: each version of a document has its own).

A part's row is written after its bytes are staged in the store, and replaced by the part
uploaded again under its number; the completion publishes exactly the parts it read. A
metadata row is written once the intent's row exists (C1/R1) and before the document is
visible, so a reader never sees a document without the metadata it was written with. Rows
whose upload or blob is gone (completed, aborted, swept, deleted after the grace) are
removed by :func:`forget_orphans`. Rows are stamped with the ledger's clock
(:meth:`Ledger.clock`), as the ledger's own reports are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import SCHEMA, table_name
from blobledger.protocol.transitions.statements import blobs, uploads

_metadata = MetaData(schema=SCHEMA)
parts = Table(
    table_name("s3_parts"), _metadata,
    Column("upload_id", String(32), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("part", String(1024), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("md5", String(32), nullable=False),
    Column("created_at", DateTime(), nullable=False),
)
objects = Table(
    table_name("s3_objects"), _metadata,
    Column("blob_name", String(1024), primary_key=True),
    Column("meta", Text, nullable=False),
    Column("acl", String(32)),
    Column("created_at", DateTime(), nullable=False),
)


@dataclass(frozen=True)
class Part:
    """One part of a multipart upload as recorded: its number, the store's part id, its
    size and MD5 (hex; the part's ETag)."""

    number: int
    part: str
    size: int
    md5: str
    created_at: datetime


async def record_part(ledger: Ledger, upload_id: str, part: Part) -> None:
    """The part's row, replacing the row of an earlier upload of its number (the last one
    recorded wins, as in S3)."""
    row = dict(upload_id=upload_id, number=part.number, part=part.part, size=part.size,
               md5=part.md5, created_at=part.created_at)
    for _ in range(3):
        try:
            async with ledger.db.transaction() as conn:
                await conn.execute(delete(parts).where(parts.c.upload_id == upload_id,
                                                       parts.c.number == part.number))
                await conn.execute(insert(parts).values(**row))
            return
        except DBIntegrityError:  # the same number recorded at the same moment: again
            continue
    raise RuntimeError(f"part {part.number} kept being recorded by another request")


async def parts_of(ledger: Ledger, upload_id: str) -> list[Part]:
    """The upload's recorded parts, by number."""
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(select(parts).where(parts.c.upload_id == upload_id)
                                   .order_by(parts.c.number))).all()
    return [Part(r.number, r.part, r.size, r.md5, r.created_at) for r in rows]


async def drop_parts(ledger: Ledger, upload_id: str) -> None:
    async with ledger.db.transaction() as conn:
        await conn.execute(delete(parts).where(parts.c.upload_id == upload_id))


async def record_meta(ledger: Ledger, blob_name: str, meta: dict[str, str],
                      acl: str | None = None) -> None:
    """The user metadata and the canned ACL (None: the bucket's applies) of the blob
    ``blob_name`` (the intent's, before its bytes)."""
    if not meta and acl is None:
        return
    async with ledger.db.transaction() as conn:
        await conn.execute(insert(objects).values(blob_name=blob_name, meta=json.dumps(meta),
                                                  acl=acl, created_at=ledger.clock()))


async def acl_of(ledger: Ledger, blob_name: str) -> str | None:
    """The canned ACL written with the blob or set since (None: the bucket's applies)."""
    async with ledger.db.transaction(readonly=True) as conn:
        found: str | None = (await conn.execute(select(objects.c.acl).where(
            objects.c.blob_name == blob_name))).scalar_one_or_none()
    return found


async def set_acl(ledger: Ledger, blob_name: str, acl: str) -> None:
    """The blob's canned ACL changed (PutObjectAcl on the version it names), its row
    written if it had none. A row left by a blob removed meanwhile is an orphan that
    :func:`forget_orphans` removes."""
    for _ in range(3):
        async with ledger.db.transaction() as conn:
            changed = (await conn.execute(update(objects).where(
                objects.c.blob_name == blob_name).values(acl=acl))).rowcount
        if changed:
            return
        try:
            async with ledger.db.transaction() as conn:
                await conn.execute(insert(objects).values(
                    blob_name=blob_name, meta="{}", acl=acl, created_at=ledger.clock()))
            return
        except DBIntegrityError:  # written at the same moment: change it again
            continue
    raise RuntimeError(f"the ACL of {blob_name!r} kept being written by another request")


async def meta_of(ledger: Ledger, blob_name: str) -> dict[str, str]:
    """The user metadata written with the blob (empty: none)."""
    async with ledger.db.transaction(readonly=True) as conn:
        text = (await conn.execute(select(objects.c.meta).where(
            objects.c.blob_name == blob_name))).scalar_one_or_none()
    return {} if text is None else dict(json.loads(text))


async def forget_orphans(ledger: Ledger) -> None:
    """The parts of uploads that are gone and the metadata of blobs that are gone. A row is
    written only after its upload's or blob's row exists, and neither comes back once
    removed, so a row found without one is never needed again."""
    async with ledger.db.transaction() as conn:
        await conn.execute(delete(parts).where(
            ~select(uploads.c.id).where(uploads.c.id == parts.c.upload_id).exists()))
        await conn.execute(delete(objects).where(
            ~select(blobs.c.name).where(blobs.c.name == objects.c.blob_name).exists()))
