"""The ledger's reads: a ready document (never a pending or held one: readable), its
bytes, a former version a signed link still names, the listing, a held document's state
for its writer, the signing key."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from blobledger._base.names import check_name_prefix
from blobledger.errors import BlobNotFound, BucketNotFound, NotFound, StoreError
from blobledger.protocol.buckets import in_scope
from blobledger.protocol.documents import Document
from blobledger.protocol.held import HoldState
from blobledger.protocol.keys import SIGNING, service_key
from blobledger.protocol.ledger.steps import Steps, _plausible_id
from blobledger.protocol.models import DEFAULT_BUCKET, DocumentRow, DocumentStatus, as_utc
from blobledger.protocol.transitions.statements import readable
from blobledger.stores.base import BlobReader

PAGE = 500


class Reads(Steps):
    """Documents as readers see them."""

    _signing_key: bytes | None

    async def hold_state(self, doc_id: str) -> HoldState | None:
        """A held or rejected document's state (``held`` with each processor's verdict so
        far, or ``rejected`` with the reason); None for a ready or unknown id. For its
        writer only: the caller compares ``owner`` (readers are told NotFound)."""
        if not isinstance(doc_id, str) or not _plausible_id(doc_id):
            return None
        return await self.held.state(doc_id)

    # -- reads ----------------------------------------------------------------------------
    async def get(self, doc_id: str) -> Document:
        """A ready document; NotFound for unknown and pending ids alike (and for a string no
        id can be, such as one holding a NUL, which some databases refuse to compare)."""
        if not isinstance(doc_id, str) or len(doc_id) > 128 or not doc_id.isprintable():
            raise NotFound(f"no document {doc_id!r}"[:200])
        async with self.db.session(readonly=True) as session:
            return Document.from_row(await self._ready_row(session, doc_id))

    async def open(
        self, doc_id: str, start: int = 0, length: int | None = None
    ) -> tuple[Document, BlobReader]:
        """The document and an open ranged read of its bytes."""
        doc = await self.get(doc_id)
        try:
            return doc, await self.store.open(doc.blob, start, length)
        except BlobNotFound:
            again = await self.get(doc_id)  # a replace may have moved it: re-read once
            if again.blob == doc.blob:
                raise StoreError(f"blob of ready document {doc_id} is missing") from None
            return again, await self.store.open(again.blob, start, length)

    async def signing_key(self) -> bytes:
        """The key of the service's own read URLs and download links: from
        ``BLOBLEDGER_SIGNING_KEY``, else generated once and kept in the database (every
        process of the deployment reads the same one). No client ever holds it."""
        if self._signing_key is None:
            configured = self.settings.signing_key
            self._signing_key = (hashlib.sha256(b"blobledger-signing\x00"
                                                + configured.encode()).digest()
                                 if configured else await service_key(self.db, SIGNING))
        return self._signing_key

    async def former(self, doc_id: str, version: int, blob_name: str) -> Document:
        """The document as it read at ``version``, whose bytes are ``blob_name``: a blob it
        points at, or one it left (replaced, deleted) that the deletion path has not taken
        yet, described by the blob's own row (its name the document's, if it is still there,
        else the blob's file name or the id). NotFound otherwise. The caller vouches that
        the document pointed at that blob at that version (a signed read URL does: the
        service signs only a ready document's current blob and version). A held document's
        blob, or a rejected one's, is NotFound (:func:`~blobledger.protocol.transitions.
        readable` decides, as for :meth:`get`)."""
        row, name = await self.transitions.pointed_blob(doc_id, blob_name)
        if row is None:
            raise NotFound(f"document {doc_id} no longer holds that blob")
        made = as_utc(row.created_at)
        return Document(id=doc_id, name=name or row.filename or doc_id, status="ready",
                        version=version, size=row.size, content_type=row.content_type,
                        sha256=row.sha256, blob=row.name, created_at=made, updated_at=made,
                        md5=row.md5)

    async def read(
        self, doc_id: str, start: int = 0, length: int | None = None
    ) -> AsyncIterator[bytes]:
        """The bytes of a ready document, streamed."""
        _, reader = await self.open(doc_id, start, length)
        try:
            async for chunk in reader:
                yield chunk
        finally:
            await reader.aclose()

    async def page(
        self, *, prefix: str = "", after: str | None = None, limit: int = 100,
        bucket: str = DEFAULT_BUCKET,
    ) -> list[Document]:
        """Up to ``limit`` ready documents of ``bucket`` in name order, after the name
        ``after`` (BucketNotFound for a bucket the caller's credential does not reach; a
        bucket that does not exist lists nothing).

        ``prefix`` matches case-sensitively on every database (SQLite's LIKE ignores ASCII
        case: the exact comparison of the leading characters decides). A prefix or ``after``
        holding a character no name can hold is InvalidInput."""
        prefix = check_name_prefix(prefix)
        if not in_scope(bucket):
            raise BucketNotFound(f"no bucket {str(bucket)[:70]!r}")
        query = (select(DocumentRow)
                 .where(DocumentRow.bucket == bucket,
                        DocumentRow.status == DocumentStatus.READY)
                 .order_by(DocumentRow.name).limit(limit))
        if prefix:
            query = query.where(DocumentRow.name.startswith(prefix, autoescape=True),
                                func.substr(DocumentRow.name, 1, len(prefix)) == prefix)
        if after is not None:
            query = query.where(DocumentRow.name > check_name_prefix(after))
        async with self.db.session(readonly=True) as session:
            rows = (await session.execute(query)).scalars().all()
        return [Document.from_row(row) for row in rows]

    async def list(self, prefix: str = "", *,
                   bucket: str = DEFAULT_BUCKET) -> AsyncIterator[Document]:
        """Every ready document of ``bucket`` under ``prefix``, in name order, fetched page
        by page."""
        after: str | None = None
        while True:
            batch = await self.page(prefix=prefix, after=after, limit=PAGE, bucket=bucket)
            for doc in batch:
                yield doc
            if len(batch) < PAGE:
                return
            after = batch[-1].name

    @staticmethod
    async def _ready_row(session: AsyncSession, doc_id: str) -> DocumentRow:
        doc = await session.get(DocumentRow, doc_id) if isinstance(doc_id, str) else None
        if doc is None or not readable(doc.status) or not in_scope(doc.bucket):
            raise NotFound(f"no document {doc_id!r}")
        return doc


