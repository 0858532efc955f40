"""Signed read URLs, fetched over real HTTP from Azurite and moto: the bytes, the answer's
type and disposition the signature fixes, and the one blob a URL opens."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

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


def _sigv4_valid(url: str, secret: str) -> bool:
    """Whether a presigned URL's ``X-Amz-Signature`` is the SigV4 signature (AWS's query
    string authentication, written out here from its specification, not botocore's) of a
    GET of its own path and query, with ``secret``: what S3 checks and moto does not."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = dict(query).get("X-Amz-Signature", "")
    signed = dict(query)["X-Amz-SignedHeaders"].split(";")
    headers = {"host": parts.netloc}
    canonical = "\n".join([
        "GET", parts.path,
        "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                 for k, v in sorted(query) if k != "X-Amz-Signature"),
        "".join(f"{name}:{headers[name]}\n" for name in signed),
        ";".join(signed), "UNSIGNED-PAYLOAD"])
    when = dict(query)["X-Amz-Date"]
    scope = dict(query)["X-Amz-Credential"].split("/", 1)[1]
    to_sign = "\n".join(["AWS4-HMAC-SHA256", when, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, given)


def _with(url: str, **changes: str) -> str:
    """The URL with query parameters changed (its path with ``path``)."""
    parts = urlsplit(url)
    query = [(k, changes.get(k, v)) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(path=changes.get("path", parts.path),
                                     query=urlencode(query, quote_via=quote)))


async def test_an_s3_read_url_is_signed_for_one_key_its_overrides_and_its_expiry(
        moto: MotoS3, tmp_path: Path) -> None:
    """moto checks no presigned signature, so what binds the URL to its one blob is checked
    here: the signature over its path (the one key), its ``response-*`` overrides and its
    expiry verifies with the store's secret and no other, and fails once any of them is
    changed (another blob's key, another disposition or type, a longer life)."""
    store = await make_store("s3", tmp_path, None, moto=moto)
    await store.put("a/one", chunks(b"first bytes"), tags={"state": "committed"})
    await store.put("a/two", chunks(b"other bytes"), tags={"state": "committed"})
    before = datetime.now(UTC).replace(microsecond=0)
    signed = await store.read_url("a/one", expires_in=240, filename="one.pdf",
                                  content_type="application/pdf")
    assert signed is not None
    url = signed.url
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert params["X-Amz-SignedHeaders"] == "host"  # Range stays the reader's to choose
    assert params["X-Amz-Expires"] == "240"
    made = datetime.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before - timedelta(seconds=1) <= made <= datetime.now(UTC)
    assert params["response-content-type"] == "application/pdf"
    assert params["response-content-disposition"].startswith('inline; filename="one.pdf"')
    assert urlsplit(url).path.endswith("/a/one")

    assert _sigv4_valid(url, moto.secret_key)
    assert not _sigv4_valid(url, moto.secret_key + "x")
    other = urlsplit(url).path.removesuffix("/a/one") + "/a/two"
    for tampered in (_with(url, path=other),
                     _with(url, **{"response-content-type": "text/html"}),
                     _with(url, **{"response-content-disposition": "attachment"}),
                     _with(url, **{"response-cache-control": "public, max-age=31536000"}),
                     _with(url, **{"X-Amz-Expires": "604800"}),
                     _with(url, **{"X-Amz-Date": "20300101T000000Z"})):
        assert not _sigv4_valid(tampered, moto.secret_key), tampered
    # the tampered URL is a well-formed request moto serves (it checks nothing): S3 would
    # refuse it (403 SignatureDoesNotMatch), which is all that stands between it and a/two
    async with httpx.AsyncClient() as http:
        assert (await http.get(_with(url, path=other))).content == b"other bytes"
    await store.close()
