"""Seeding the states a crash leaves, directly and cheaply (rows and real blobs)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

from sqlalchemy import select

from blobledger import Ledger
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.protocol.models import (
    BlobKind,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    IdempotencyKeyRow,
    KeyState,
)
from blobledger.protocol.transitions import new_token

HOUR = 3600.0


async def one(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def seed_intent(
    ledger: Ledger,
    *,
    tag: str | None,
    kind: str = BlobKind.CREATE,
    doc_id: str | None = None,
    age: float = HOUR,
    lease_in: float = -HOUR / 2,
    data: bytes = b"intent bytes",
    key: str | None = None,
    state: str = BlobState.PENDING,
    doc_name: str | None = None,
    name: str | None = None,
) -> str:
    """A blob row (and for a creation its pending document) ``age`` seconds old, with the
    blob tagged ``tag`` (None: never uploaded), under ``name`` or a new one. Returns the blob
    name."""
    now = await ledger.now()
    then = now - timedelta(seconds=age)
    name = name or new_blob_name(ledger.settings.blob_prefix, "seed.txt")
    doc_id = doc_id or new_document_id()
    async with ledger.db.session() as session:
        if kind == BlobKind.CREATE and state == BlobState.PENDING:
            session.add(DocumentRow(
                id=doc_id, name=doc_name or f"seeded-{doc_id}", status=DocumentStatus.PENDING,
                blob_name=name, version=1, content_type="text/plain", created_at=then,
                updated_at=then))
            await session.flush()
        session.add(BlobRow(
            name=name, document_id=doc_id, kind=kind, state=state, content_type="text/plain",
            attempt=new_token(), lease_until=now + timedelta(seconds=lease_in),
            created_at=then, changed_at=then))
        if key is not None:
            session.add(IdempotencyKeyRow(
                key=key, state=KeyState.PENDING, blob_name=name, document_id=doc_id,
                content_type="text/plain", created_at=then))
    if tag is not None:
        await ledger.store.put(name, one(data), tags={"state": tag})
    return name


async def rows(ledger: Ledger) -> dict[str, str]:
    async with ledger.db.session() as session:
        return dict((await session.execute(select(BlobRow.name, BlobRow.state))).all())


async def documents(ledger: Ledger) -> dict[str, tuple[str, str]]:
    async with ledger.db.session() as session:
        found = await session.execute(
            select(DocumentRow.id, DocumentRow.status, DocumentRow.blob_name))
        return {doc: (status, blob) for doc, status, blob in found.all()}


async def stored(ledger: Ledger) -> dict[str, str]:
    return {info.name: (info.tags or {}).get("state", "") async for info in ledger.store.list()}
