"""Each operation of the client against a real server, blocking and async."""

from __future__ import annotations

import hashlib
import io
import uuid

import httpx
import pytest

from blobledger.client import AsyncClient, Client
from blobledger.errors import (
    IdempotencyConflict,
    NameTaken,
    NotFound,
    PreconditionFailed,
)
from tests.support.server import Server


def unique(stem: str) -> str:
    return f"client/{uuid.uuid4().hex[:10]}/{stem}"


def test_create_show_replace_read_list_link_delete(server: Server) -> None:
    name = unique("notes.txt")
    with Client(server.url) as client:
        doc = client.create(name, b"hello world", content_type="text/plain")
        assert (doc.name, doc.version, doc.size) == (name, 1, 11)
        assert doc.sha256 == hashlib.sha256(b"hello world").hexdigest()
        assert client.get(doc.id) == doc
        assert client.read(doc.id) == b"hello world"
        assert client.read(doc.id, start=6) == b"world"
        assert client.read(doc.id, start=0, end=4) == b"hello"
        assert b"".join(client.stream(doc.id)) == b"hello world"

        new = client.replace(doc.id, io.BytesIO(b"hello again"), if_match=doc.version)
        assert (new.id, new.version) == (doc.id, 2)
        with pytest.raises(PreconditionFailed) as stale:
            client.replace(doc.id, b"lost", if_match=1)
        assert stale.value.current_version == 2 and "(HTTP 412)" in str(stale.value)
        assert client.read(doc.id) == b"hello again"

        link = client.link(doc.id)
        assert link.url.startswith(server.url)
        assert httpx.get(link.url).content == b"hello again"

        with pytest.raises(PreconditionFailed):
            client.delete(doc.id, if_match=1)
        client.delete(doc.id, if_match=2)
        with pytest.raises(NotFound):
            client.get(doc.id)
        with pytest.raises(NotFound):
            client.read(doc.id)


def test_pages_follow_the_cursor(server: Server) -> None:
    folder = unique("")
    with Client(server.url) as client:
        made = [client.create(f"{folder}{n}.bin", bytes([n]) * n) for n in range(1, 6)]
        pages = list(client.pages(folder, page_size=2))
        assert [len(page.items) for page in pages] == [2, 2, 1]
        assert [doc.id for doc in client.documents(folder, page_size=2)] == \
            [doc.id for doc in made]
        assert pages[0].items[0].raw["name"] == f"{folder}1.bin"


def test_create_reuses_its_key_and_maps_the_refusals(server: Server) -> None:
    name = unique("once.bin")
    key = uuid.uuid4().hex
    with Client(server.url) as client:
        first = client.create(name, b"abc", idempotency_key=key)
        assert client.create(name, b"abc", idempotency_key=key) == first  # the same one
        with pytest.raises(IdempotencyConflict):
            client.create(name, b"other bytes", idempotency_key=key)
        with pytest.raises(NameTaken) as taken:
            client.create(name, b"abc")
        assert "(HTTP 409)" in str(taken.value)


def test_direct_and_tus_uploads(server: Server) -> None:
    data = bytes(range(256)) * 1000
    with Client(server.url) as client:
        direct = client.upload_direct(unique("direct.bin"), io.BytesIO(data),
                                      content_type="application/octet-stream")
        assert direct.sha256 == hashlib.sha256(data).hexdigest()
        assert client.read(direct.id) == data
        tus = client.upload_tus(unique("tus.bin"), data, chunk_size=100_000)
        assert (tus.size, tus.sha256) == (len(data), hashlib.sha256(data).hexdigest())
        assert client.read(tus.id) == data


async def test_the_async_client_does_the_same(server: Server) -> None:
    name = unique("async.txt")
    async with AsyncClient(server.url) as client:
        doc = await client.create(name, b"async bytes")
        assert (await client.get(doc.id)).name == name
        replaced = await client.replace(doc.id, b"async again", if_match=1)
        assert await client.read(doc.id, start=6) == b"again"
        assert [d.id async for d in client.documents(name)] == [doc.id]
        assert (await client.link(doc.id)).url.startswith(server.url)
        tus = await client.upload_tus(unique("async-tus.bin"), b"x" * 3000, chunk_size=1000)
        direct = await client.upload_direct(unique("async-direct.bin"), b"y" * 3000)
        assert await client.read(tus.id) == b"x" * 3000
        assert await client.read(direct.id) == b"y" * 3000
        with pytest.raises(PreconditionFailed):
            await client.delete(doc.id, if_match=1)
        await client.delete(doc.id, if_match=replaced.version)
        with pytest.raises(NotFound):
            await client.get(doc.id)


def test_a_read_url_and_what_kind_of_link(server: Server) -> None:
    """``read_url``: ``POST /documents/{id}/url``, a URL that reads the current bytes with
    no credential (the store's own on Azure: a SAS; the service's on local disk), Range
    honoured. ``link`` on a service without tokens is the plain content URL, and says so."""
    with Client(server.url) as client:
        doc = client.create(unique("signed.txt"), b"signed bytes")
        signed = client.read_url(doc.id)
        assert httpx.get(signed.url).content == b"signed bytes"
        assert httpx.get(signed.url, headers={"Range": "bytes=7-"}).content == b"bytes"
        if server.env["BLOBLEDGER_STORE_URL"].startswith("azure:"):
            assert signed.url.startswith(server.env["BLOBLEDGER_AZURE_CONNECTION_STRING"]
                                         .split("BlobEndpoint=", 1)[1].rstrip(";"))
            assert signed.expires_at is not None and signed.expires_at.tzinfo is not None
        link = client.link(doc.id)
        assert (link.signed, link.expires_in) == (False, None)
        with pytest.raises(NotFound):
            client.read_url("0" * 26)


async def test_the_async_client_reads_a_signed_url(server: Server) -> None:
    async with AsyncClient(server.url) as client:
        doc = await client.create(unique("async-signed.txt"), b"async signed")
        signed = await client.read_url(doc.id)
        async with httpx.AsyncClient() as plain:
            assert (await plain.get(signed.url)).content == b"async signed"


def test_create_and_list_in_a_bucket(server: Server) -> None:
    bucket = f"client-{uuid.uuid4().hex[:10]}"
    name = unique("in-a-bucket.txt")
    with httpx.Client(base_url=server.url) as http:
        assert http.post("/buckets", json={"name": bucket}).status_code == 201
    with Client(server.url) as client:
        doc = client.create(name, b"bucketed", bucket=bucket)
        same = client.create(name, b"default's")
        assert (doc.bucket, same.bucket) == (bucket, "default")
        assert [d.id for d in client.documents(name, bucket=bucket)] == [doc.id]
        assert [d.id for d in client.documents(name)] == [same.id]
        with pytest.raises(NameTaken):
            client.create(name, b"again", bucket=bucket)
        with pytest.raises(NotFound):
            client.create(unique("x"), b"x", bucket="client-no-such-bucket")
