"""A tus completion whose upload the sweeper takes (its intent swept, the store's staged
upload aborted) after the completion read it and before it publishes the parts: the
client is told ``UploadGone`` (410) on every store, whatever the store answers to the
publication of an upload it no longer has, and nothing is left behind: Azurite publishes
the parts all the same (the sweeper's delete of a blob never created leaves its uncommitted
blocks), and the completion removes that rowless ``pending`` blob itself, where only
``reconcile --fix`` would have found it. The failpoints' hook runs the sweeper when the
completion reaches ``staged.before_commit``; the attachment upload (a staged blob, no
document) the same."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blobledger import failpoints
from blobledger.errors import BlobNotFound, UploadGone
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.transitions.statements import ATTACHMENT_KEY
from blobledger.uploads.resumable import Resumable
from tests.conftest import BACKENDS
from tests.support.sweeping import sweep_at

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


async def chunk(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.mark.parametrize("meta", [{"name": "swept.bin"}, {ATTACHMENT_KEY: ""}],
                         ids=["document", "attachment"])
async def test_a_completion_whose_upload_is_swept_before_publication_is_gone(
        ledger: Ledger, meta: dict[str, str]) -> None:
    resumable = Resumable(ledger)
    sweep, swept = sweep_at(ledger, "staged.before_commit")
    data = b"the only part"
    upload = await resumable.create(len(data), meta)
    assert await resumable.append(upload, 0, chunk(data)) == len(data)
    upload = await resumable.find(upload.id)
    failpoints.set_hook(sweep)
    try:
        with pytest.raises(UploadGone):
            await resumable.complete(upload)
    finally:
        failpoints.set_hook(None)
    assert swept == [1]
    assert await ledger.transitions.find_upload(upload.id) is None
    assert [d async for d in ledger.list()] == []
    assert [u.name async for u in ledger.store.list_uncommitted()] == []
    with pytest.raises(BlobNotFound):
        await ledger.store.stat(upload.blob_name)
