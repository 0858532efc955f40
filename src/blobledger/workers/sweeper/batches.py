"""What the sweeper's batches share: the run's report, a claim and its rows, and the
storage calls a batch makes at most :data:`CONCURRENCY` at a time (tags, stat)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from blobledger.errors import BlobLedgerError, BlobNotFound, StoreUnavailable

log = logging.getLogger("blobledger.sweeper")

#: storage calls in flight at once for the per-blob steps (tags, stat)
CONCURRENCY = 16
T = TypeVar("T")


@dataclass
class SweepReport:
    """What one run did; ``to_log()`` is the one summary line."""

    claimed: int = 0
    swept: int = 0  # stale intents removed (blob deleted or already absent)
    rolled_forward: int = 0  # creations made ready from a committed blob
    moved_to_deleting: int = 0  # replacements handed to the deletion path
    fenced: int = 0  # stale staged attachments fenced and handed to the deletion path
    deleted: int = 0  # deletion-path rows done (blob deleted or already absent)
    absent: int = 0  # blobs already gone when their delete was due
    late: int = 0  # blobs a paused writer made after its row was due to go, deleted after
    refused: int = 0  # the guard said no (logged); the row is left alone
    errors: int = 0  # steps that failed; the rows are retried after the lease
    keys_expired: int = 0  # idempotency keys past their retention, forgotten
    retagged: int = 0  # owed retags done (the deferred retag: workers/retagger.py)
    batches: int = 0
    seconds: float = 0.0
    aborted: str | None = None  # why the run stopped early (store unreachable)

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    def to_log(self) -> str:
        return json.dumps({"event": "sweep", **self.as_dict()})


@dataclass(frozen=True)
class _Claimed:
    name: str
    document_id: str | None
    kind: str


@dataclass
class _Claim:
    rows: list[_Claimed]
    token: str
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [row.name for row in self.rows]


async def _gather(limit: int, coros: Sequence[Awaitable[T]]) -> list[T]:
    """Await every coroutine, at most ``limit`` at a time, in order."""
    semaphore = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[T]) -> T:
        async with semaphore:
            return await coro

    return list(await asyncio.gather(*(one(c) for c in coros)))


async def _tags_or_none(
    get_tags: Callable[[str], Awaitable[dict[str, str]]], name: str
) -> str | None:
    try:
        return (await get_tags(name)).get("state", "")
    except BlobNotFound:
        return None


async def _stat_or_error(stat: Callable[[str], Awaitable[T]], name: str) -> T | BlobLedgerError:
    try:
        return await stat(name)
    except StoreUnavailable:
        raise
    except BlobLedgerError as exc:
        return exc
