"""The public view of a document, and the adapters that turn user data into byte streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import IO, Any, Protocol

from blobledger.errors import UploadTooLarge
from blobledger.protocol.models import DEFAULT_BUCKET, as_utc

Data = bytes | bytearray | memoryview | IO[bytes] | AsyncIterable[bytes] | Iterable[bytes]
READ_SIZE = 1024 * 1024


class DocumentRecord(Protocol):
    """What a document is read from: an ORM ``DocumentRow`` or a Core result row."""

    id: str
    name: str
    status: str
    blob_name: str
    version: int
    size: int | None
    content_type: str
    sha256: str | None
    md5: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Document:
    """A document as readers see it (only ``ready`` ones are ever returned to readers)."""

    id: str
    name: str
    status: str
    version: int
    size: int | None
    content_type: str
    sha256: str | None
    blob: str
    created_at: datetime
    updated_at: datetime
    #: the bucket the document lives in (its name is unique within it)
    bucket: str = DEFAULT_BUCKET
    #: the MD5 of its bytes (hex), computed by the service at upload beside the SHA-256;
    #: None for a version the service did not hash itself (the sweeper's roll-forward of a
    #: store that kept no MD5)
    md5: str | None = None

    @classmethod
    def from_row(cls, row: DocumentRecord) -> Document:
        return cls(
            id=row.id,
            name=row.name,
            status=row.status,
            version=row.version,
            size=row.size,
            content_type=row.content_type,
            sha256=row.sha256,
            blob=row.blob_name,
            created_at=as_utc(row.created_at),
            updated_at=as_utc(row.updated_at),
            bucket=getattr(row, "bucket", None) or DEFAULT_BUCKET,
            md5=row.md5,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Document:
        """The inverse of :meth:`to_json` (a response kept for an idempotency key)."""
        values = dict(data)
        for key in ("created_at", "updated_at"):
            values[key] = datetime.fromisoformat(str(values[key]).replace("Z", "+00:00"))
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["created_at"] = self.created_at.isoformat().replace("+00:00", "Z")
        data["updated_at"] = self.updated_at.isoformat().replace("+00:00", "Z")
        return data


def known_size(data: Data) -> int | None:
    """The size of data given whole (bytes); None for a stream or a file."""
    return len(data) if isinstance(data, (bytes, bytearray, memoryview)) else None


async def as_stream(data: Data) -> AsyncIterator[bytes]:
    """Any accepted data form as an async byte stream (file reads run off the loop)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        if len(data):
            yield bytes(data)
        return
    if hasattr(data, "__aiter__"):
        async for chunk in data:
            if not isinstance(chunk, (bytes, bytearray, memoryview)):
                raise TypeError("an async data stream must yield bytes")
            yield bytes(chunk)
        return
    read = getattr(data, "read", None)
    if callable(read):
        while True:
            chunk = await asyncio.to_thread(read, READ_SIZE)
            if not chunk:
                return
            if not isinstance(chunk, (bytes, bytearray)):
                raise TypeError("file objects must be opened in binary mode")
            yield bytes(chunk)
    if isinstance(data, Iterable):
        for chunk in data:
            yield bytes(chunk)
        return
    raise TypeError(f"unsupported data type {type(data).__name__}")


async def limit_size(data: AsyncIterable[bytes], limit: int) -> AsyncIterator[bytes]:
    """``data``, raising UploadTooLarge as soon as it passes ``limit`` bytes."""
    total = 0
    async for chunk in data:
        total += len(chunk)
        if total > limit:
            raise UploadTooLarge(limit)
        yield chunk
