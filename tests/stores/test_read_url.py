"""Signed read URLs, fetched over real HTTP from Azurite and moto: the bytes, the answer's
type and disposition the signature fixes, and the one blob a URL opens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobledger.stores.base import Store
from tests.conftest import make_store
from tests.support.services import Azurite, MotoS3


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.fixture(params=["azure", "s3"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    kind = str(request.param)
    azurite: Azurite | None = request.getfixturevalue("azurite") if kind == "azure" else None
    moto: MotoS3 | None = request.getfixturevalue("moto") if kind == "s3" else None
    return await make_store(kind, tmp_path, azurite, moto=moto)


async def test_a_signed_read_url_reads_its_blob_with_the_signed_headers(store: Store) -> None:
    await store.put("a/one", chunks(b"first bytes"), tags={"state": "committed"})
    await store.put("a/two", chunks(b"other bytes"), tags={"state": "committed"})
    signed = await store.read_url("a/one", expires_in=60, filename="r\u00e9sum\u00e9.pdf",
                                  content_type="application/pdf")
    assert signed is not None
    async with httpx.AsyncClient() as http:
        got = await http.get(signed.url)
        assert got.status_code == 200 and got.content == b"first bytes"
        assert got.headers["content-type"] == "application/pdf"
        assert got.headers["content-disposition"] == (
            "inline; filename=\"resume.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9.pdf")
        assert got.headers["cache-control"] == "private, max-age=60, immutable"
        ranged = await http.get(signed.url, headers={"Range": "bytes=6-10"})
        assert ranged.status_code == 206 and ranged.content == b"bytes"
        assert "a/one" in signed.url.split("?")[0] or "a%2Fone" in signed.url
        if "sig=" in signed.url:  # Azure: the SAS is checked, another blob is refused
            other = await http.get(signed.url.replace("a/one", "a/two"))
            assert other.status_code == 403
            written = await http.put(signed.url, content=b"x",
                                     headers={"x-ms-blob-type": "BlockBlob"})
            assert written.status_code == 403
    await store.close()


async def test_local_disk_has_no_signed_read_url(tmp_path: Path) -> None:
    store = await make_store("local", tmp_path, None)
    await store.put("a/one", chunks(b"bytes"), tags={"state": "committed"})
    assert await store.read_url("a/one", expires_in=60, filename="x",
                                content_type="text/plain") is None
