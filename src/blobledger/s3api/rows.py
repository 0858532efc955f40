"""The endpoint's own rows (migrations 0013, 0014): a multipart upload's parts
(``s3_parts``, each with its checksum when its upload has an algorithm) and what S3 keeps of
a blob written through the endpoint (``s3_objects``, keyed by the blob's name: each version
of a document has its own): its user metadata, its canned ACL and, for one written by a
multipart upload, its shape (:class:`Shape`: the ETag, the parts' sizes and checksums, the
object's checksum).

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
from typing import Any

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
    Column("checksum", String(128)),
)
objects = Table(
    table_name("s3_objects"), _metadata,
    Column("blob_name", String(1024), primary_key=True),
    Column("meta", Text, nullable=False),
    Column("acl", String(32)),
    Column("created_at", DateTime(), nullable=False),
    Column("etag", String(48)),
    Column("parts", Text),
    Column("checksum_algorithm", String(16)),
    Column("checksum_type", String(16)),
    Column("checksum", String(128)),
)


@dataclass(frozen=True)
class Part:
    """One part of a multipart upload as recorded: its number, the store's part id, its
    size and MD5 (hex; the part's ETag), and its checksum in its upload's algorithm
    (base64; None: the upload has none)."""

    number: int
    part: str
    size: int
    md5: str
    created_at: datetime
    checksum: str | None = None


@dataclass(frozen=True)
class Shape:
    """What S3 keeps of an object a multipart upload wrote: its ETag (without quotes,
    ``<hex>-<n>``), each part's (size, checksum) in order, and the upload's checksum
    algorithm and type with the object's checksum (None: the upload had none)."""

    etag: str
    parts: tuple[tuple[int, str | None], ...]
    algorithm: str | None = None
    type: str | None = None
    checksum: str | None = None

    def columns(self) -> dict[str, str | None]:
        return dict(etag=self.etag, parts=json.dumps([list(p) for p in self.parts]),
                    checksum_algorithm=self.algorithm, checksum_type=self.type,
                    checksum=self.checksum)

    @classmethod
    def from_row(cls, row: Any) -> Shape | None:
        if row.etag is None or row.parts is None:
            return None
        return cls(row.etag, tuple((int(size), checksum)
                                   for size, checksum in json.loads(row.parts)),
                   row.checksum_algorithm, row.checksum_type, row.checksum)


async def record_part(ledger: Ledger, upload_id: str, part: Part) -> None:
    """The part's row, replacing the row of an earlier upload of its number (the last one
    recorded wins, as in S3)."""
    row = dict(upload_id=upload_id, number=part.number, part=part.part, size=part.size,
               md5=part.md5, created_at=part.created_at, checksum=part.checksum)
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
    return [Part(r.number, r.part, r.size, r.md5, r.created_at, r.checksum) for r in rows]


async def drop_parts(ledger: Ledger, upload_id: str) -> None:
    async with ledger.db.transaction() as conn:
        await conn.execute(delete(parts).where(parts.c.upload_id == upload_id))


async def record_meta(ledger: Ledger, blob_name: str, meta: dict[str, str],
                      acl: str | None = None, shape: Shape | None = None) -> None:
    """The user metadata and the canned ACL (None: the bucket's applies) of the blob
    ``blob_name`` (the intent's, before its bytes), and the shape of the multipart object
    it holds (when it is one)."""
    if not meta and acl is None and shape is None:
        return
    columns = {} if shape is None else shape.columns()
    async with ledger.db.transaction() as conn:
        await conn.execute(insert(objects).values(blob_name=blob_name, meta=json.dumps(meta),
                                                  acl=acl, created_at=ledger.clock(),
                                                  **columns))


@dataclass(frozen=True)
class Kept:
    """What the endpoint keeps of a blob's object (its ``s3_objects`` row): its user
    metadata, its canned ACL (None: the bucket's applies) and its shape (None: one part)."""

    meta: dict[str, str]
    acl: str | None = None
    shape: Shape | None = None


async def kept_of(ledger: Ledger, blob_name: str) -> Kept:
    """The blob's row, read once (nothing kept: no metadata, the bucket's ACL, one part)."""
    async with ledger.db.transaction(readonly=True) as conn:
        row = (await conn.execute(select(objects).where(
            objects.c.blob_name == blob_name))).one_or_none()
    if row is None:
        return Kept({})
    return Kept(dict(json.loads(row.meta)), row.acl, Shape.from_row(row))


async def acl_of(ledger: Ledger, blob_name: str) -> str | None:
    """The canned ACL written with the blob or set since (None: the bucket's applies)."""
    return (await kept_of(ledger, blob_name)).acl


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


async def record_shape(ledger: Ledger, blob_name: str, shape: Shape) -> None:
    """The shape of the multipart object the (still pending) blob ``blob_name`` holds, on
    its row (written by CreateMultipartUpload when the upload has metadata). A completion
    tried again writes it again, the same."""
    for _ in range(3):
        try:
            async with ledger.db.transaction() as conn:
                done = await conn.execute(update(objects).where(
                    objects.c.blob_name == blob_name).values(**shape.columns()))
                if done.rowcount == 0:
                    await conn.execute(insert(objects).values(
                        blob_name=blob_name, meta="{}", created_at=ledger.clock(),
                        **shape.columns()))
            return
        except DBIntegrityError:  # a twin completion inserted it at the same moment: again
            continue
    raise RuntimeError(f"the shape of {blob_name} kept being recorded by another request")


async def shape_of(ledger: Ledger, blob_name: str) -> Shape | None:
    """The shape of the multipart object the blob holds (None: an object of one part)."""
    return (await kept_of(ledger, blob_name)).shape


async def shapes_of(ledger: Ledger, blob_names: list[str]) -> dict[str, Shape]:
    """The shapes of the multipart objects among the blobs, by blob name (one query)."""
    if not blob_names:
        return {}
    async with ledger.db.transaction(readonly=True) as conn:
        rows = (await conn.execute(select(objects).where(
            objects.c.blob_name.in_(blob_names), objects.c.etag.is_not(None)))).all()
    found = {row.blob_name: Shape.from_row(row) for row in rows}
    return {name: shape for name, shape in found.items() if shape is not None}


async def meta_of(ledger: Ledger, blob_name: str) -> dict[str, str]:
    """The user metadata written with the blob (empty: none)."""
    return (await kept_of(ledger, blob_name)).meta


async def forget_orphans(ledger: Ledger) -> None:
    """The parts of uploads that are gone and the metadata of blobs that are gone. A row is
    written only after its upload's or blob's row exists, and neither comes back once
    removed, so a row found without one is never needed again."""
    async with ledger.db.transaction() as conn:
        await conn.execute(delete(parts).where(
            ~select(uploads.c.id).where(uploads.c.id == parts.c.upload_id).exists()))
        await conn.execute(delete(objects).where(
            ~select(blobs.c.name).where(blobs.c.name == objects.c.blob_name).exists()))
