"""The S3 endpoint's rows (migration 0013): a part uploaded again replaces only its own
row, an upload's parts and a blob's metadata are read and dropped by their own key, and only
the rows of uploads and blobs that are gone are forgotten."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.s3api.rows import (
    Part,
    drop_parts,
    forget_orphans,
    meta_of,
    objects,
    parts_of,
    record_meta,
    record_part,
)
from blobledger.uploads.resumable import Resumable

WHEN = datetime(2026, 12, 1, 12, 0)


def part(number: int, tag: str) -> Part:
    return Part(number, f"{number}-{tag}", number * 10, tag * 32, WHEN)


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"])
async def test_the_rows_of_what_is_gone_go_and_only_those(ledger: Ledger) -> None:
    uploads = Resumable(ledger)
    live = (await uploads.create(5, {"name": "live.bin"})).id
    other = (await uploads.create(5, {"name": "other.bin"})).id
    gone = "f" * 32  # an upload whose row is gone (completed long ago, aborted, swept)
    for upload in (live, other, gone):
        await record_part(ledger, upload, part(1, "a"))
        await record_part(ledger, upload, part(2, "b"))
    await record_part(ledger, live, part(1, "c"))  # part 1 again: its row alone replaced
    assert [p.part for p in await parts_of(ledger, live)] == ["1-c", "2-b"]
    assert [p.part for p in await parts_of(ledger, other)] == ["1-a", "2-b"]

    doc = await ledger.create("kept.txt", b"kept", on_intent=lambda intent: record_meta(
        ledger, intent.blob_name, {"colour": "blue"}))
    await record_meta(ledger, "documents/gone.txt", {"colour": "red"})  # its blob is gone
    assert await meta_of(ledger, doc.blob) == {"colour": "blue"}

    await forget_orphans(ledger)
    assert await parts_of(ledger, gone) == []
    assert await meta_of(ledger, "documents/gone.txt") == {}
    assert [p.part for p in await parts_of(ledger, live)] == ["1-c", "2-b"]
    assert len(await parts_of(ledger, other)) == 2
    assert await meta_of(ledger, doc.blob) == {"colour": "blue"}

    await drop_parts(ledger, other)
    assert await parts_of(ledger, other) == []
    assert len(await parts_of(ledger, live)) == 2


@pytest.mark.parametrize("backend", ["sqlite-local"])
async def test_the_rows_are_stamped_with_the_ledgers_clock(ledger: Ledger) -> None:
    """A process ten days ahead (its clock offset) stamps its metadata rows ten days ahead,
    as its own reports are: the endpoint's rows follow the ledger's clock, not the host's."""
    ledger.clock_offset = timedelta(days=10).total_seconds()
    before = ledger.clock()
    doc = await ledger.create("stamped.txt", b"x", on_intent=lambda intent: record_meta(
        ledger, intent.blob_name, {"colour": "green"}))
    after = ledger.clock()
    async with ledger.db.transaction(readonly=True) as conn:
        stamp = (await conn.execute(select(objects.c.created_at).where(
            objects.c.blob_name == doc.blob))).scalar_one()
    assert before <= stamp <= after
