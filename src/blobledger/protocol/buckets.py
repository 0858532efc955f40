"""Buckets: namespaces of documents, each with its own settings (docs/buckets.md).

A document lives in one bucket and its name is unique there (the database's unique
constraint on (``bucket``, ``name``) decides, as it did for ``name`` alone). Every write
path asks :meth:`Buckets.admit` before its C1: the caller's credential reaches the bucket,
the bucket exists, the media type is one it allows, the declared size fits its largest
object and its quota; the write's stream is then cut at :meth:`Bucket.cap` bytes. Every
read by id goes through :func:`in_scope`, so that a credential limited to some buckets
sees no document of another (NotFound, as for an id that does not exist).

A credential's buckets reach the ledger through :data:`SCOPE`, a context variable the
service sets per request (:func:`scoped`); a library caller sets nothing and reaches every
bucket.

Quotas count the bucket's documents in every state (pending, held, ready) and their sizes
as recorded; a write is admitted when what it declares (or, when its size is not known
before its bytes, one document) still fits, and its stream is cut where the remaining bytes
end. Writes running at once are each judged on what was committed before them: together
they may pass the byte quota by what they had in flight.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, delete, exists, func, insert, select, update
from sqlalchemy.exc import IntegrityError as DBIntegrityError

from blobledger._base.names import check_content_type
from blobledger._base.scopes import DEFAULT_BUCKET, is_bucket_name
from blobledger.db import Database
from blobledger.errors import (
    BucketExists,
    BucketForbidden,
    BucketNotEmpty,
    BucketNotFound,
    BucketQuotaExceeded,
    ContentTypeRefused,
    InvalidInput,
    UploadTooLarge,
)
from blobledger.protocol.documents import Data, as_stream, known_size
from blobledger.protocol.models import BucketRow, DocumentRow, as_utc, utcnow

buckets_table: Table = BucketRow.__table__  # type: ignore[assignment]
documents_table: Table = DocumentRow.__table__  # type: ignore[assignment]

#: the buckets the current request's credential is limited to (None: every bucket)
SCOPE: ContextVar[frozenset[str] | None] = ContextVar("blobledger_bucket_scope",
                                                      default=None)
#: how long a process trusts what it read of a bucket's settings (seconds)
CACHE_SECONDS = 2.0
#: the most media type patterns one bucket allows
MAX_CONTENT_TYPES = 64
#: a bucket's canned ACLs, as S3 defines them: who reads (lists the bucket, reads its
#: objects) and writes it beyond the credentials that reach it: nobody (``private``),
#: anyone, even without a credential (``public-read``; ``public-read-write`` also writes),
#: or any S3 access key of the service (``authenticated-read``)
CANNED_ACLS = ("private", "public-read", "public-read-write", "authenticated-read")


@contextmanager
def scoped(buckets: frozenset[str] | None) -> Iterator[None]:
    """Within the block, the ledger reaches only ``buckets`` (None: every bucket)."""
    token = SCOPE.set(buckets)
    try:
        yield
    finally:
        SCOPE.reset(token)


def in_scope(bucket: str) -> bool:
    """Whether the current credential reaches ``bucket``."""
    limited = SCOPE.get()
    return limited is None or bucket in limited


def check_bucket_name(name: object) -> str:
    if not is_bucket_name(name):
        raise InvalidInput(f"{str(name)[:70]!r} is not a bucket name: 3-63 lower-case "
                           "letters, digits, '.' and '-', starting and ending with a letter "
                           "or a digit")
    assert isinstance(name, str)
    return name


def _check_pattern(pattern: str) -> str:
    pattern = pattern.strip().lower()
    if pattern in ("*", "*/*"):
        return "*/*"
    major, sep, minor = pattern.partition("/")
    if sep and minor == "*" and major and "*" not in major:
        check_content_type(major + "/x")
        return pattern
    return check_content_type(pattern).split(";")[0].strip().lower()


def check_content_types(patterns: object) -> tuple[str, ...]:
    """Media type patterns (``image/*``, ``application/pdf``), lower-cased; empty: any."""
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p.strip()]
    if not isinstance(patterns, (list, tuple)) or len(patterns) > MAX_CONTENT_TYPES:
        raise InvalidInput(f"content_types must be a list of at most {MAX_CONTENT_TYPES} "
                           "media types or type/* patterns")
    try:
        return tuple(dict.fromkeys(_check_pattern(str(p)) for p in patterns))
    except InvalidInput as exc:
        raise InvalidInput(f"content_types: {exc}") from None


def check_acl(value: object) -> str:
    """A canned ACL's name (InvalidInput if it is not one of :data:`CANNED_ACLS`)."""
    if value not in CANNED_ACLS:
        raise InvalidInput(f"acl must be one of {', '.join(CANNED_ACLS)}")
    assert isinstance(value, str)
    return value


def _limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidInput(f"{name} must be a whole number of at least 0")
    return value


@dataclass(frozen=True)
class Bucket:
    """A bucket and its settings (None: no limit of its own)."""

    name: str
    max_object_bytes: int | None
    content_types: tuple[str, ...]
    hold: bool
    quota_bytes: int | None
    quota_objects: int | None
    created_at: datetime
    #: the canned ACL (:data:`CANNED_ACLS`)
    acl: str = "private"
    #: the S3 access key that created it (None: created by the command line, the HTTP API
    #: or the library, or the default bucket: owned by no key)
    owner: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> Bucket:
        types = tuple(t for t in (row.content_types or "").split(",") if t)
        return cls(row.name, row.max_object_bytes, types, bool(row.hold), row.quota_bytes,
                   row.quota_objects, as_utc(row.created_at), row.acl or "private",
                   row.owner)

    def allows(self, content_type: str) -> bool:
        """Whether a write of this media type may go to the bucket."""
        if not self.content_types:
            return True
        media = content_type.split(";")[0].strip().lower()
        return any(fnmatch.fnmatchcase(media, p) for p in self.content_types)

    def cap(self, service_max: int) -> int:
        """The most bytes one write may store here: the service's largest upload and the
        bucket's largest object."""
        if self.max_object_bytes is not None:
            return min(service_max, self.max_object_bytes)
        return service_max

    def quota_left(self, usage: Usage | None, replacing: int = 0) -> int | None:
        """The bytes left under the byte quota (a replace frees its old version's)."""
        if self.quota_bytes is None or usage is None:
            return None
        return max(self.quota_bytes - usage.bytes + replacing, 0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "max_object_bytes": self.max_object_bytes,
                "content_types": list(self.content_types), "hold": self.hold,
                "quota_bytes": self.quota_bytes, "quota_objects": self.quota_objects,
                "acl": self.acl, "owner": self.owner,
                "created_at": self.created_at.isoformat().replace("+00:00", "Z")}


@dataclass(frozen=True)
class Usage:
    """What a bucket holds: its documents (pending, held and ready) and their bytes."""

    objects: int
    bytes: int


@dataclass(frozen=True)
class Admitted:
    """A write the bucket admits: the bucket, the most bytes one object may hold there, and
    the bytes left under its quota (None: no byte quota)."""

    bucket: Bucket
    cap: int
    left: int | None

    def limit(self, data: Data) -> Data:
        """``data``, cut where the bucket's quota ends (BucketQuotaExceeded) when it has a
        byte quota and the data's size is not known before its bytes."""
        left, size = self.left, known_size(data)
        if left is None or (size is not None and size <= left):
            return data
        return _within(as_stream(data), left, self.bucket)


async def _within(stream: AsyncIterator[bytes], left: int,
                  bucket: Bucket) -> AsyncIterator[bytes]:
    total = 0
    async for chunk in stream:
        total += len(chunk)
        if total > left:
            raise BucketQuotaExceeded(f"the write would take bucket {bucket.name!r} past its "
                                      f"quota of {bucket.quota_bytes} bytes")
        yield chunk


def _clock() -> float:
    """The running loop's monotonic clock (a simulated loop's virtual one, so that a cached
    bucket is read again at the same step of every replay)."""
    return asyncio.get_running_loop().time()


class Buckets:
    """The buckets of one ledger's database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[str, tuple[float, Bucket]] = {}

    # -- management -----------------------------------------------------------------------
    async def create(
        self, name: str, *, max_object_bytes: int | None = None,
        content_types: object = (), hold: bool = False, quota_bytes: int | None = None,
        quota_objects: int | None = None, acl: str = "private", owner: str | None = None,
    ) -> Bucket:
        """A new bucket (BucketExists if the name is taken; BucketForbidden outside the
        caller's buckets); ``owner``: the S3 access key that creates it."""
        name = check_bucket_name(name)
        if not in_scope(name):
            raise BucketForbidden(f"the credential does not reach bucket {name!r}")
        values = dict(
            name=name, max_object_bytes=_limit("max_object_bytes", max_object_bytes),
            content_types=",".join(check_content_types(content_types)) or None,
            hold=bool(hold), quota_bytes=_limit("quota_bytes", quota_bytes),
            quota_objects=_limit("quota_objects", quota_objects), acl=check_acl(acl),
            owner=owner, created_at=utcnow())
        try:
            async with self.db.transaction() as conn:
                await conn.execute(insert(buckets_table).values(**values))
        except DBIntegrityError:
            raise BucketExists(f"a bucket named {name!r} exists already") from None
        self._cache.pop(name, None)
        return await self.get(name)

    async def update(self, name: str, **changes: object) -> Bucket:
        """Change some of a bucket's settings (the same names as :meth:`create`'s; None
        lifts a limit). Writes already admitted keep the settings they were admitted by."""
        bucket = await self.get(name)
        values: dict[str, object] = {}
        for key, value in changes.items():
            if key in ("max_object_bytes", "quota_bytes", "quota_objects"):
                values[key] = _limit(key, value)
            elif key == "content_types":
                values[key] = ",".join(check_content_types(value or ())) or None
            elif key == "hold":
                values[key] = bool(value)
            elif key == "acl":
                values[key] = check_acl(value)
            else:
                raise InvalidInput(f"{key} is not a bucket's setting")
        if values:
            async with self.db.transaction() as conn:
                await conn.execute(update(buckets_table).where(
                    buckets_table.c.name == bucket.name).values(**values))
            self._cache.pop(name, None)
        return await self.get(name)

    async def get(self, name: str) -> Bucket:
        """The bucket (BucketNotFound: none, or one the caller's credential does not
        reach)."""
        if not is_bucket_name(name) or not in_scope(name):
            raise BucketNotFound(f"no bucket {str(name)[:70]!r}")
        async with self.db.transaction(readonly=True) as conn:
            row = (await conn.execute(select(buckets_table).where(
                buckets_table.c.name == name))).one_or_none()
        if row is None:
            raise BucketNotFound(f"no bucket {name!r}")
        bucket = Bucket.from_row(row)
        self._cache[name] = (_clock(), bucket)
        return bucket

    async def list(self) -> list[Bucket]:
        """Every bucket the caller's credential reaches, in name order."""
        async with self.db.transaction(readonly=True) as conn:
            rows = (await conn.execute(select(buckets_table).order_by(
                buckets_table.c.name))).all()
        return [Bucket.from_row(row) for row in rows if in_scope(row.name)]

    async def usage(self, name: str) -> Usage:
        """The bucket's documents (pending, held and ready) and their recorded bytes."""
        async with self.db.transaction(readonly=True) as conn:
            count, total = (await conn.execute(select(
                func.count(), func.coalesce(func.sum(documents_table.c.size), 0)).where(
                documents_table.c.bucket == name))).one()
        return Usage(int(count), int(total))

    async def delete(self, name: str) -> None:
        """Remove an empty bucket: in one statement, only while no document (pending,
        held or ready) is in it (BucketNotEmpty otherwise). The default bucket stays."""
        bucket = await self.get(name)
        if bucket.name == DEFAULT_BUCKET:
            raise InvalidInput("the default bucket cannot be deleted")
        try:  # a create's C1 in flight holds the foreign key: refused, or waited for
            async with self.db.transaction() as conn:
                gone = (await conn.execute(delete(buckets_table).where(
                    buckets_table.c.name == name,
                    ~exists().where(documents_table.c.bucket == name)))).rowcount
        except DBIntegrityError:
            gone = 0
        self._cache.pop(name, None)
        if gone != 1:
            usage = await self.usage(name)
            raise BucketNotEmpty(f"bucket {name!r} holds {usage.objects} document(s): "
                                 "delete them first")

    # -- the writers' check ---------------------------------------------------------------
    async def lookup(self, name: str) -> Bucket:
        """The bucket as this process read it at most :data:`CACHE_SECONDS` ago (a hot
        path's existence check; :meth:`get` reads it now). BucketNotFound also for one
        the caller's credential does not reach."""
        if not in_scope(name):
            raise BucketNotFound(f"no bucket {str(name)[:70]!r}")
        found = self._cache.get(name)
        if found is not None and _clock() - found[0] < CACHE_SECONDS:
            return found[1]
        return await self.get(name)

    async def admit(self, name: str, content_type: str, size: int | None, service_max: int,
                    *, replacing: int | None = None) -> Admitted:
        """Whether a write of ``size`` bytes (None: not known before its bytes) of this
        media type may go to the bucket ``name`` (``replacing``: the size of the version a
        replace frees); the most bytes it may store. BucketForbidden, BucketNotFound,
        ContentTypeRefused, UploadTooLarge or BucketQuotaExceeded otherwise."""
        if not in_scope(name):
            raise BucketForbidden(f"the credential does not reach bucket {str(name)[:70]!r}")
        bucket = await self.lookup(name)
        if not bucket.allows(content_type):
            raise ContentTypeRefused(f"bucket {name!r} does not take {content_type!r} "
                                     f"(it takes {', '.join(bucket.content_types)})")
        usage = None
        if bucket.quota_bytes is not None or bucket.quota_objects is not None:
            usage = await self.usage(name)
            if (replacing is None and bucket.quota_objects is not None
                    and usage.objects >= bucket.quota_objects):
                raise BucketQuotaExceeded(f"bucket {name!r} holds {usage.objects} of its "
                                          f"{bucket.quota_objects} documents")
        cap = bucket.cap(service_max)
        left = bucket.quota_left(usage, replacing or 0)
        if size is not None and size > cap:
            raise UploadTooLarge(cap)
        if left is not None and (left == 0 or (size is not None and size > left)):
            raise BucketQuotaExceeded(f"bucket {name!r} has {left} of its "
                                      f"{bucket.quota_bytes} bytes left")
        return Admitted(bucket, cap, left)
