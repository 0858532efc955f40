"""A token's share of uploads (``UploadOwner``), counted inside the creating transaction:
its open uploads (not completed, not expired, their intent still pending) and, among them,
those that create a document (each holds its name). Each test holds one upload that must
not count, or must count only against one of the two limits, and opens the next one at the
limit (``scripts/mutate`` drops each term of the two counts and checks that a test fails).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import update

from blobledger import Ledger
from blobledger.errors import QuotaExceeded
from blobledger.protocol.models import UploadRow
from blobledger.protocol.transitions import UploadOwner
from blobledger.uploads.resumable import Resumable

ONE_OPEN = UploadOwner("a" * 16, max_open=1, max_names=1)
OTHER = UploadOwner("b" * 16, max_open=1, max_names=1)
ONE_NAME = UploadOwner("c" * 16, max_open=5, max_names=1)
DATA = b"bytes of an upload under a quota"


async def _body(data: bytes) -> AsyncIterator[bytes]:
    yield data


def document(name: str) -> dict[str, str]:
    return {"name": name}


def attachment(filename: str) -> dict[str, str]:
    return {"attachment": "1", "filename": filename}


async def test_another_tokens_uploads_do_not_count(ledger: Ledger) -> None:
    """One token holds its one open upload; another token at the same limit still opens
    one, while the first is refused its second."""
    resumable = Resumable(ledger)
    await resumable.create(len(DATA), document("first.txt"), ONE_OPEN)
    with pytest.raises(QuotaExceeded, match="open uploads"):
        await resumable.create(len(DATA), attachment("second.bin"), ONE_OPEN)
    await resumable.create(len(DATA), document("other.txt"), OTHER)


async def test_a_completed_attachment_upload_does_not_count(ledger: Ledger) -> None:
    """A completed attachment upload is done while its blob waits, still pending, to be
    attached: it no longer counts, so the token opens its next upload."""
    resumable = Resumable(ledger)
    upload = await resumable.create(len(DATA), attachment("staged.bin"), ONE_OPEN)
    assert await resumable.append(upload, 0, _body(DATA)) == len(DATA)
    await resumable.complete(await resumable.find(upload.id))
    staged = await ledger.staged_upload(upload.id)  # done, its blob still pending
    assert staged.size == len(DATA)
    await resumable.create(len(DATA), document("next.txt"), ONE_OPEN)


async def test_an_expired_upload_not_yet_swept_does_not_count(ledger: Ledger) -> None:
    """An upload past its expiry, whose intent no sweeper has removed yet (still pending),
    no longer counts: the token opens its next upload."""
    resumable = Resumable(ledger)
    await resumable.create(len(DATA), document("expired.txt"), ONE_OPEN)
    ledger.transitions.offset = ledger.settings.resumable_expiry + 1
    try:
        await resumable.create(len(DATA), document("next.txt"), ONE_OPEN)
    finally:
        ledger.transitions.offset = 0


async def test_an_open_upload_whose_document_is_ready_does_not_count(ledger: Ledger) -> None:
    """An upload an older release left open after its C4 (its blob committed, its document
    ready: the row ``close_settled_upload`` closes) no longer counts, though another token's
    intent is pending beside it: the token opens its next upload."""
    resumable = Resumable(ledger)
    await resumable.create(len(DATA), document("pending.txt"), OTHER)
    upload = await resumable.create(len(DATA), document("settled.txt"), ONE_OPEN)
    assert await resumable.append(upload, 0, _body(DATA)) == len(DATA)
    doc = await resumable.complete(await resumable.find(upload.id))
    assert doc.name == "settled.txt"
    async with ledger.db.session() as session:  # the older release's second transaction
        await session.execute(update(UploadRow).where(UploadRow.id == upload.id)
                              .values(state="open"))
        await session.commit()
    reopened = await ledger.transitions.find_upload(upload.id)
    assert reopened is not None and reopened.state == "open" and not reopened.expired
    await resumable.create(len(DATA), document("next.txt"), ONE_OPEN)


async def test_reserved_names_count_document_uploads_only(ledger: Ledger) -> None:
    """A token that may hold one name: an open attachment upload holds none, so a document
    upload opens beside it; that one holds the name, so a second document upload is
    refused while another attachment upload still opens."""
    resumable = Resumable(ledger)
    await resumable.create(len(DATA), attachment("first.bin"), ONE_NAME)
    await resumable.create(len(DATA), document("named.txt"), ONE_NAME)
    with pytest.raises(QuotaExceeded, match="document names"):
        await resumable.create(len(DATA), document("refused.txt"), ONE_NAME)
    await resumable.create(len(DATA), attachment("second.bin"), ONE_NAME)
