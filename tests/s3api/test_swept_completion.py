"""A CompleteMultipartUpload whose upload the sweeper takes (its intent swept, the store's
staged upload aborted) after the completion read it and before it publishes the parts:
the client is told ``NoSuchUpload``, on every store, whatever the store answers to the
publication of an upload it no longer has (S3's ``NoSuchUpload``, moto's 500, a missing
part on the local disk), and nothing is left behind: Azurite publishes the parts all the
same (the sweeper's delete of a blob never created leaves its uncommitted blocks), and the
completion removes that rowless ``pending`` blob itself, where only ``reconcile --fix``
would have found it. The request is signed as boto3 signs it and sent through the
service's own app in process (``tests.explore.s3writers``), the failpoints' hook running
the sweeper when the completion reaches ``staged.before_commit``."""

from __future__ import annotations

import pytest

from blobledger import failpoints
from blobledger.errors import BlobNotFound
from blobledger.protocol.ledger import Ledger
from tests.conftest import BACKENDS
from tests.explore.s3writers import S3Endpoint, S3Refused, visible
from tests.support.sweeping import sweep_at

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


async def test_a_completion_whose_upload_is_swept_before_publication_is_no_such_upload(
        ledger: Ledger) -> None:
    s3 = S3Endpoint(ledger, ledger.settings)
    sweep, swept = sweep_at(ledger, "staged.before_commit")

    try:
        upload = await s3.create_upload("swept.bin")
        etag = await s3.upload_part("swept.bin", upload, 1, b"the only part")
        record = await ledger.transitions.find_upload(upload)
        assert record is not None
        failpoints.set_hook(sweep)
        with pytest.raises(S3Refused) as refused:
            await s3.complete("swept.bin", upload, [(1, etag)])
    finally:
        failpoints.set_hook(None)
        await s3.close()
    assert swept == [1]
    assert (refused.value.status, refused.value.code) == (404, "NoSuchUpload")
    assert await visible(ledger, "swept.bin") is None
    assert await ledger.transitions.find_upload(upload) is None
    assert [u.name async for u in ledger.store.list_uncommitted()] == []
    with pytest.raises(BlobNotFound):
        await ledger.store.stat(record.blob_name)
