"""Signed and redirected downloads on every backend: ``POST /documents/{id}/url``,
``GET /documents/{id}/content`` answering 307 (``?redirect=true`` or
``BLOBLEDGER_DOWNLOADS=redirect``), each URL followed with httpx (the store's own, Azurite's
SAS or moto's presigned GET, over real HTTP; the service's through the app) and its bytes
read; the version route's immutable caching; and a read URL that outlives no byte."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.errors import ConfigError
from blobledger.workers.sweeper import Sweeper
from tests.api.conftest import client_for, problem

READER = {"Authorization": "Bearer reader-token"}
WRITER = {"Authorization": "Bearer writer-token"}
TOKENS = {"reader-token": frozenset({"read"}), "writer-token": frozenset({"read", "write"})}


def _gated(ledger: Ledger, **changes: object) -> Ledger:
    """The ledger with tokens and a grace long enough for store-signed URLs (240 s)."""
    settings = ledger.settings.with_(api_tokens=TOKENS, delete_grace=300, **changes)
    return Ledger(ledger.db, ledger.store, settings)


async def fetch(app: httpx.AsyncClient, url: str,
                headers: dict[str, str] | None = None) -> httpx.Response:
    """GET a read URL with no credential: the store's over the network, the service's
    (a path) through the app."""
    if urlsplit(url).scheme:
        async with httpx.AsyncClient() as http:
            return await http.get(url, headers=headers)
    return await app.get(url, headers=headers)


def store_signed(ledger: Ledger) -> bool:
    return not ledger.store.url.startswith("file:")


async def test_a_read_token_gets_a_url_that_reads_one_document(ledger: Ledger) -> None:
    gated = _gated(ledger)
    doc = await ledger.create("signed/report.txt", b"the report\n", content_type="text/plain")
    other = await ledger.create("signed/other.html", b"<p>other</p>",
                                content_type="text/html")
    async with client_for(gated, gated.settings) as client:
        problem(await client.post(f"/documents/{doc.id}/url"), 401)
        problem(await client.post("/documents/0123456789abcdef0123456789abcdef/url",
                                  headers=READER), 404)
        answer = await client.post(f"/documents/{doc.id}/url", headers=READER)
        assert answer.status_code == 200, answer.text
        url, expires = answer.json()["url"], answer.json()["expires_at"]
        assert "reader-token" not in url
        left = datetime.fromisoformat(expires) - datetime.now(UTC)
        assert 0 < left.total_seconds() <= 240 + 2
        assert urlsplit(url).scheme == ("http" if store_signed(ledger) else "")

        got = await fetch(client, url)
        assert got.status_code == 200 and got.content == b"the report\n"
        assert got.headers["content-type"].startswith("text/plain")
        assert got.headers["content-disposition"].startswith('inline; filename="report.txt"')
        ranged = await fetch(client, url, {"Range": "bytes=4-9"})
        assert ranged.status_code == 206 and ranged.content == b"report"

        # the reader can read, not write, with its token or with the URL
        problem(await client.put(f"/documents/{doc.id}/content", content=b"x",
                                 headers={**READER, "If-Match": '"1"'}), 403)
        problem(await client.delete(f"/documents/{doc.id}", headers=READER), 403)
        assert (await ledger.get(doc.id)).version == 1

        # the URL opens its one blob: not another document's
        if store_signed(ledger):
            assert doc.blob.rsplit("/", 1)[-1] in url and other.blob.rsplit("/", 1)[-1] not in url
            swapped = url.replace(doc.blob.rsplit("/", 1)[-1], other.blob.rsplit("/", 1)[-1])
            if ledger.store.url.startswith("azure:"):  # Azurite checks the SAS's signature
                assert (await fetch(client, swapped)).status_code == 403
        else:
            assert f"blob={doc.blob.replace('/', '%2F')}" in url
            problem(await fetch(client, url.replace(doc.id, other.id)), 401, "unauthorized")
            # the URL's blob is signed: naming another blob (the other document's) is refused
            swapped = url.replace(doc.blob.replace("/", "%2F"), other.blob.replace("/", "%2F"))
            problem(await fetch(client, swapped), 401, "unauthorized")
        # HTML is never inline
        html = (await client.post(f"/documents/{other.id}/url", headers=READER)).json()
        shown = await fetch(client, html["url"])
        assert shown.content == b"<p>other</p>"
        assert shown.headers["content-disposition"].startswith("attachment;")


async def test_content_redirects_by_setting_or_by_request(ledger: Ledger) -> None:
    data = bytes(range(256)) * 64
    doc = await ledger.create("signed/photo.png", data, content_type="image/png")
    proxying, redirecting = _gated(ledger), _gated(ledger, downloads="redirect")
    async with client_for(proxying, proxying.settings) as client:
        streamed = await client.get(f"/documents/{doc.id}/content", headers=READER)
        assert streamed.status_code == 200 and streamed.content == data
        assert streamed.headers["cache-control"] == "private, no-cache"
        assert streamed.headers["content-disposition"].startswith("inline;")
        assert streamed.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in streamed.headers["content-security-policy"]
        moved = await client.get(f"/documents/{doc.id}/content?redirect=true", headers=READER)
        assert moved.status_code == 307 and moved.headers["cache-control"] == "no-store"
        got = await fetch(client, moved.headers["location"])
        assert got.status_code == 200 and got.content == data
        assert got.headers["content-type"] == "image/png"
    async with client_for(redirecting, redirecting.settings) as client:
        moved = await client.get(f"/documents/{doc.id}/content", headers=READER)
        assert moved.status_code == 307
        part = await fetch(client, moved.headers["location"], {"Range": "bytes=256-511"})
        assert part.status_code == 206 and part.content == data[256:512]
        head = await client.head(f"/documents/{doc.id}/content", headers=READER)
        assert head.status_code == 307
        # a cached copy still current: 304, no redirect
        same = await client.get(f"/documents/{doc.id}/content",
                                headers={**READER, "If-None-Match": '"1"'})
        assert same.status_code == 304
        streamed = await client.get(f"/documents/{doc.id}/content?redirect=false",
                                    headers=READER)
        assert streamed.status_code == 200 and streamed.content == data
        problem(await client.get(f"/documents/{doc.id}/content"), 401)


async def test_a_version_is_immutable_and_gone_once_replaced(ledger: Ledger) -> None:
    doc = await ledger.create("signed/v.txt", b"version one", content_type="text/plain")
    async with client_for(ledger) as client:  # no tokens: public caching
        first = await client.get(f"/documents/{doc.id}/versions/1/content")
        assert first.status_code == 200 and first.content == b"version one"
        assert first.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert first.headers["etag"] == '"1"'
        latest = await client.get(f"/documents/{doc.id}/content")
        assert latest.headers["cache-control"] == "no-cache" and latest.headers["etag"] == '"1"'
        url = (await client.post(f"/documents/{doc.id}/url")).json()
        if not store_signed(ledger):  # the delete grace of 0 here: the service's own URL
            assert url == {"url": f"/documents/{doc.id}/versions/1/content",
                           "expires_at": None}
        await ledger.replace(doc.id, b"version two", expected_version=1)
        problem(await client.get(f"/documents/{doc.id}/versions/1/content"), 410,
                "version-gone")
        problem(await client.get(f"/documents/{doc.id}/versions/3/content"), 404)
        problem(await fetch(client, url["url"]), 410, "version-gone")
        second = await client.get(f"/documents/{doc.id}/versions/2/content")
        assert second.content == b"version two" and second.headers["etag"] == '"2"'
    gated = _gated(ledger)
    async with client_for(gated, gated.settings) as client:
        private = await client.get(f"/documents/{doc.id}/versions/2/content", headers=READER)
        assert private.headers["cache-control"] == "private, max-age=31536000, immutable"


@pytest.mark.parametrize("backend", ["postgresql-azure", "postgresql-s3"], indirect=True)
async def test_a_url_never_outlives_its_bytes(ledger: Ledger) -> None:
    """The sweeper runs on the database's clock (moved ahead by ``clock_offset``); the URL
    expires on the storage's, which stays real: within the URL's real lifetime, the sweeper
    far ahead (past the URL's expiry, within the grace) leaves its blob readable; past the
    grace the blob goes. And no setting lets a URL live longer than the grace less skew."""
    gated = _gated(ledger)  # grace 300 s, URLs 240 s, skew 60 s
    doc = await ledger.create("signed/kept.bin", b"old bytes")
    async with client_for(gated, gated.settings) as client:
        url = (await client.post(f"/documents/{doc.id}/url", headers=READER)).json()["url"]
        await gated.replace(doc.id, b"new bytes", expected_version=1)
        await gated.delete(doc.id)
        for ahead in (0.0, 241.0, 270.0):  # past the expiry, 30 s within the grace
            gated.clock_offset = ahead
            await Sweeper(gated).run_once()
            got = await fetch(client, url)
            assert got.status_code == 200 and got.content == b"old bytes", ahead
        gated.clock_offset = 301.0
        await Sweeper(gated).run_once()
        gone = await fetch(client, url)  # S3 answers 403 for a missing key to a GET alone
        assert gone.status_code in ((404,) if "azure" in ledger.store.url else (403, 404))
        assert b"old bytes" not in gone.content
        assert [info async for info in ledger.store.list()] == []

    assert Settings(delete_grace=300, read_url_expiry=240).read_url_expiry == 240
    with pytest.raises(ConfigError, match="READ_URL_EXPIRY"):
        Settings(delete_grace=300, read_url_expiry=241)
    with pytest.raises(ConfigError, match="READ_URL_EXPIRY"):
        gated.settings.with_(read_url_expiry=240, delete_grace=120)


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"], indirect=True)
async def test_the_services_own_url_reads_its_version_until_it_expires(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """On local disk the service signs its own URL, naming the blob it was made for: as a
    store's SAS or presigned GET, it reads those bytes after a replace and a delete, with
    the sweeper far ahead within the grace; once the deletion path took them, 410; and on
    the service's clock past its expiry, it opens nothing."""
    gated = _gated(ledger)  # grace 300 s, URLs 240 s, skew 60 s
    doc = await ledger.create("signed/kept.txt", b"old bytes", content_type="text/plain")
    async with client_for(gated, gated.settings) as client:
        answer = (await client.post(f"/documents/{doc.id}/url", headers=READER)).json()
        url = answer["url"]
        assert url.startswith(f"/documents/{doc.id}/versions/1/content?blob=")
        await gated.replace(doc.id, b"new bytes", expected_version=1)
        got = await fetch(client, url)
        assert got.status_code == 200 and got.content == b"old bytes"
        assert got.headers["etag"] == '"1"' and got.headers["content-length"] == "9"
        assert got.headers["content-disposition"].startswith('inline; filename="kept.txt"')
        ranged = await fetch(client, url, {"Range": "bytes=4-8"})
        assert ranged.status_code == 206 and ranged.content == b"bytes"
        # without the URL's blob, the version is gone as before; the latest reads the new
        problem(await client.get(f"/documents/{doc.id}/versions/1/content", headers=READER),
                410, "version-gone")
        now = (await client.post(f"/documents/{doc.id}/url", headers=READER)).json()["url"]
        assert (await fetch(client, now)).content == b"new bytes"
        await gated.delete(doc.id)
        for ahead in (0.0, 241.0, 270.0):  # within the grace (30 s to spare): kept
            gated.clock_offset = ahead
            await Sweeper(gated).run_once()
            got = await fetch(client, url)
            assert got.status_code == 200 and got.content == b"old bytes", ahead
        gated.clock_offset = 301.0
        await Sweeper(gated).run_once()
        problem(await fetch(client, url), 410, "version-gone")
        assert [info async for info in ledger.store.list()] == []
        # on the service's clock, 241 s on: the URL has expired
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 241)
        problem(await fetch(client, url), 401, "unauthorized")


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
async def test_without_tokens_the_url_names_its_blob_signed_all_the_same(
        ledger: Ledger) -> None:
    """No tokens: the URL names its blob and expires, signed with the service's own key (no
    ``by``), and reads its version after a replace until then; changing its expiry or its
    blob breaks the signature."""
    open_ = Ledger(ledger.db, ledger.store, ledger.settings.with_(delete_grace=300))
    doc = await ledger.create("signed/open.txt", b"first")
    other = await ledger.create("signed/other.txt", b"other")
    async with client_for(open_, open_.settings) as client:
        answer = (await client.post(f"/documents/{doc.id}/url")).json()
        assert answer["expires_at"] is not None
        assert "sig=" in answer["url"] and "by=" not in answer["url"]
        await open_.replace(doc.id, b"second", expected_version=1)
        assert (await fetch(client, answer["url"])).content == b"first"
        expired = answer["url"].replace("expires=", "expires=1")  # a later expiry is refused
        problem(await fetch(client, expired), 401, "unauthorized")
        swapped = answer["url"].replace(doc.blob.replace("/", "%2F"),
                                        other.blob.replace("/", "%2F"))
        problem(await fetch(client, swapped), 401, "unauthorized")
