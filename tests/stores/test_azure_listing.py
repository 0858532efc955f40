"""The lean List Blobs reading (``blobledger.stores.azure.listing``) against the SDK's own
``list_blobs`` on the same Azurite container: field by field, over pages, with names the
service returns encoded, and with the SDK's errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from azure.storage.blob import ContentSettings

from blobledger.errors import StoreError
from blobledger.stores.azure import AzureStore, listing
from blobledger.stores.azure.reads import _info
from blobledger.stores.base import BlobInfo
from tests.conftest import new_container
from tests.support.services import Azurite

NAMES = [
    "docs/a.bin",
    "docs/with space & <angle> 'quote'.txt",
    "docs/ünïcödé-名前.pdf",
    "docs/percent%20and+plus.bin",
    "docs/z/deeper/name.bin",
    "other/outside-the-prefix.bin",
]


@pytest.fixture
async def store(azurite: Azurite) -> AsyncIterator[AzureStore]:
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    await store.prepare()
    client = store._client()
    for i, name in enumerate(NAMES):
        await client.upload_blob(
            name, b"x" * i, tags={"state": "committed" if i % 2 else "pending", "k": f"v {i}"},
            metadata={"sha256": f"{i:064x}", "md5": f"{i:032x}"} if i % 3 else None,
            content_settings=ContentSettings(content_type="text/plain") if i % 2 else None)
    async with store:
        yield store


async def _sdk(store: AzureStore, prefix: str | None, include: list[str]) -> list[BlobInfo]:
    return [_info(p, dict(p.tags or {}) if "tags" in include else None)
            async for p in store._client().list_blobs(name_starts_with=prefix,
                                                      include=include or None)]


@pytest.mark.parametrize("include", [[], ["tags"], ["metadata"], ["tags", "metadata"]],
                         ids=lambda i: "+".join(i) or "bare")
@pytest.mark.parametrize("prefix", [None, "docs/"])
async def test_the_lean_reading_equals_the_sdks(
    store: AzureStore, include: list[str], prefix: str | None
) -> None:
    client = store._client()
    assert listing.supported(client)
    expected = await _sdk(store, prefix, include)
    assert len(expected) == len(NAMES) - (1 if prefix else 0)
    lean = [info async for info in listing.blobs(client, prefix, include)]
    assert lean == expected


@pytest.mark.parametrize("page", [1, 2, 4])
async def test_pages_follow_the_continuation_marker(store: AzureStore, page: int) -> None:
    names = [i.name async for i in listing.blobs(store._client(), None, ["tags"], page=page)]
    assert names == sorted(NAMES)


async def test_the_store_lists_through_the_lean_reading(store: AzureStore) -> None:
    listed = [info async for info in store.list("docs/", tags=True, checksums=True)]
    assert listed == await _sdk(store, "docs/", ["tags", "metadata"])
    assert {i.tags["state"] for i in listed if i.tags} == {"committed", "pending"}


def test_an_encoded_name_is_decoded_and_blobs_are_dropped_once_read() -> None:
    body = (b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>'
            b'<Blob><Name Encoded="true">a%01b</Name><Properties>'
            b'<Last-Modified>Tue, 01 Dec 2026 10:00:00 GMT</Last-Modified>'
            b'<Etag>0x8D</Etag><Content-Length>3</Content-Length></Properties>'
            b'<Tags><TagSet><Tag><Key>state</Key><Value>committed</Value></Tag></TagSet></Tags>'
            b'</Blob></Blobs><NextMarker>m2</NextMarker></EnumerationResults>')
    for feed in (1, 7, listing.FEED):  # any slicing of the answer reads the same
        original = listing.FEED
        listing.FEED = feed
        try:
            blobs, marker = listing.parse(body, tags=True)
        finally:
            listing.FEED = original
        assert marker == "m2"
        assert [(b.name, b.size, b.etag, b.tags) for b in blobs] == [
            ("a\x01b", 3, '"0x8D"', {"state": "committed"})]
        assert blobs[0].last_modified is not None and blobs[0].last_modified.year == 2026


async def test_a_missing_container_is_a_store_error(azurite: Azurite) -> None:
    store = AzureStore(new_container(), connection_string=azurite.connection_string)
    async with store:
        with pytest.raises(StoreError):
            [info async for info in store.list("")]


def test_the_reader_keeps_no_read_blob() -> None:
    blob = (b'<Blob><Name>n%d</Name><Properties><Last-Modified>Tue, 01 Dec 2026 10:00:00 GMT'
            b'</Last-Modified><Etag>"e"</Etag><Content-Length>1</Content-Length></Properties>'
            b'</Blob>')
    body = (b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>'
            + b"".join(blob % i for i in range(50)) + b"</Blobs><NextMarker/></EnumerationResults>")
    reader = listing._Reader(tags=False)
    read = []
    for start in range(0, len(body), 100):
        read += reader.feed(body[start:start + 100])
        assert reader._blobs is None or len(reader._blobs) <= 1  # at most the one being read
    read += reader.close()
    assert [b.name for b in read] == [f"n{i}" for i in range(50)]
    assert reader.marker is None
