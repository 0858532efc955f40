"""``GET /documents/{id}/variants/{name}`` and ``/documents/{id}/versions/{v}/variants/{name}``
in process (SQLite + disk, PostgreSQL + Azurite): made on the first request, the same bytes to
two concurrent first requests, ETag and 304, immutable caching on a version's route and 410
once it is replaced, problem documents for what has no variant or is refused, and the read
scope."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from blobledger.protocol.ledger import Ledger
from tests.api.conftest import client_for, problem
from tests.support.holds import Holds
from tests.variants.conftest import variant_rows
from tests.variants.images import bomb, png, size_of

pytestmark = pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"])


async def test_served_made_once_and_cached(ledger: Ledger) -> None:
    doc = await ledger.create("a.png", png(300, 150), content_type="image/png")
    async with client_for(ledger) as client:
        url = f"/documents/{doc.id}/variants/thumb"
        one, two = await asyncio.gather(client.get(url), client.get(url))
        assert one.status_code == two.status_code == 200, one.text
        assert one.content == two.content and size_of(one.content) == (64, 32)
        assert one.headers["content-type"] == "image/webp"
        assert one.headers["cache-control"] == "no-cache"
        assert one.headers["etag"] == two.headers["etag"]
        assert len(await variant_rows(ledger)) == 1  # made once
        again = await client.get(url, headers={"If-None-Match": one.headers["etag"]})
        assert again.status_code == 304 and again.headers["etag"] == one.headers["etag"]

        pinned = await client.get(f"/documents/{doc.id}/versions/1/variants/thumb")
        assert pinned.content == one.content
        assert pinned.headers["cache-control"] == "public, max-age=31536000, immutable"
        await ledger.replace(doc.id, png(10, 10), expected_version=1, content_type="image/png")
        problem(await client.get(f"/documents/{doc.id}/versions/1/variants/thumb"), 410,
                "version-gone")
        problem(await client.get(f"/documents/{doc.id}/versions/3/variants/thumb"), 404)
        fresh = await client.get(url)
        assert size_of(fresh.content) == (10, 10) and fresh.headers["etag"] != \
            one.headers["etag"]


async def test_replaced_while_made(ledger: Ledger, holds: Holds) -> None:
    """The version ended under the maker: the current version's route makes the new
    version's variant instead; the old claim goes to the deletion path."""
    doc = await ledger.create("a.png", png(300, 150), content_type="image/png")
    holds.at("variant.after_tag")
    async with client_for(ledger) as client:
        asked = asyncio.create_task(client.get(f"/documents/{doc.id}/variants/thumb"))
        await holds.wait("variant.after_tag")
        await ledger.replace(doc.id, png(10, 10), expected_version=1, content_type="image/png")
        holds.go("variant.after_tag")
        answer = await asked
    assert answer.status_code == 200 and size_of(answer.content) == (10, 10)
    assert sorted((await variant_rows(ledger)).values()) == ["attached", "deleting"]


async def test_what_answers_a_problem(ledger: Ledger) -> None:
    ledger.settings = ledger.settings.with_(max_image_pixels=1_000_000)
    text = await ledger.create("a.txt", b"hello", content_type="text/plain")
    image = await ledger.create("a.png", png(), content_type="image/png")
    fake = await ledger.create("b.png", b"no image", content_type="image/png")
    boom = await ledger.create("c.png", bomb(), content_type="image/png")
    async with client_for(ledger) as client:
        problem(await client.get(f"/documents/{text.id}/variants/thumb"), 404, "no-variant")
        problem(await client.get(f"/documents/{image.id}/variants/nope"), 404, "no-variant")
        problem(await client.get("/documents/0123/variants/thumb"), 404, "not-found")
        problem(await client.get(f"/documents/{fake.id}/variants/thumb"), 415,
                "unsupported-image")
        problem(await client.get(f"/documents/{boom.id}/variants/thumb"), 422,
                "image-too-large")
    assert await variant_rows(ledger) == {}


async def test_the_read_scope(ledger: Ledger) -> None:
    doc = await ledger.create("a.png", png(), content_type="image/png")
    settings = ledger.settings.with_(api_tokens="r:read")
    async with client_for(ledger, settings) as client:
        url = f"/documents/{doc.id}/variants/square"
        assert (await client.get(url)).status_code == 401
        answer = await client.get(url, headers={"Authorization": "Bearer r"})
        assert answer.status_code == 200 and size_of(answer.content) == (48, 24)
        assert answer.headers["cache-control"] == "private, no-cache"


async def test_head_range_and_conditions(ledger: Ledger) -> None:
    """HEAD, Range, If-Range and If-None-Match on both variant routes, against the variant's
    own ETag (its SHA-256), by the content route's rules."""
    doc = await ledger.create("r.png", png(300, 150), content_type="image/png")
    async with client_for(ledger) as client:
        for url in (f"/documents/{doc.id}/variants/thumb",
                    f"/documents/{doc.id}/versions/1/variants/thumb"):
            # a HEAD first: it makes the variant, and tells its headers without bytes
            head = await client.head(url)
            assert head.status_code == 200 and head.content == b""
            tag = head.headers["etag"]
            whole = await client.get(url)
            assert whole.status_code == 200 and whole.headers["etag"] == tag
            data = whole.content
            assert tag == f'"{hashlib.sha256(data).hexdigest()}"'
            assert head.headers["content-length"] == str(len(data))
            assert head.headers["content-type"] == "image/webp"
            assert head.headers["accept-ranges"] == "bytes" == whole.headers["accept-ranges"]
            assert head.headers["cache-control"] == whole.headers["cache-control"]
            assert len(await variant_rows(ledger)) == 1  # HEAD made it; GET read the same

            part = await client.get(url, headers={"Range": "bytes=2-9"})
            assert part.status_code == 206 and part.content == data[2:10]
            assert part.headers["content-range"] == f"bytes 2-9/{len(data)}"
            assert part.headers["content-length"] == "8" and part.headers["etag"] == tag
            tail = await client.get(url, headers={"Range": "bytes=-5"})
            assert tail.status_code == 206 and tail.content == data[-5:]
            head_part = await client.head(url, headers={"Range": "bytes=0-0"})
            assert head_part.status_code == 206 and head_part.content == b""
            assert head_part.headers["content-range"] == f"bytes 0-0/{len(data)}"
            assert head_part.headers["content-length"] == "1"

            past = problem(await client.get(url, headers={"Range": f"bytes={len(data)}-"}),
                           416, "range-not-satisfiable")
            assert "the variant has" in str(past["detail"])
            assert (await client.head(url, headers={"Range": f"bytes={len(data)}-"})
                    ).status_code == 416
            refused = await client.get(url, headers={"Range": f"bytes={len(data) + 5}-"})
            assert refused.headers["content-range"] == f"bytes */{len(data)}"

            # If-Range: the variant's strong ETag honours the Range; anything else sends all
            same = await client.get(url, headers={"Range": "bytes=0-3", "If-Range": tag})
            assert same.status_code == 206 and same.content == data[:4]
            for other in ('"1"', f"W/{tag}", "Wed, 02 Dec 2026 00:00:00 GMT"):
                changed = await client.get(url, headers={"Range": "bytes=0-3",
                                                         "If-Range": other})
                assert changed.status_code == 200 and changed.content == data, other

            for match in (tag, f"W/{tag}", f'"nope", {tag}', "*"):
                for method in ("GET", "HEAD"):
                    cached = await client.request(method, url, headers={
                        "If-None-Match": match, "Range": "bytes=0-3"})
                    assert cached.status_code == 304 and cached.content == b"", (method, match)
                    assert cached.headers["etag"] == tag
            stale = await client.get(url, headers={"If-None-Match": '"1"'})
            assert stale.status_code == 200 and stale.content == data
        for missing in (f"/documents/{doc.id}/variants/nope",
                        f"/documents/{doc.id}/versions/2/variants/thumb"):
            assert (await client.head(missing)).status_code == 404


def test_the_routes_are_documented(ledger: Ledger) -> None:
    from blobledger.api import create_app

    paths = create_app(ledger).openapi()["paths"]
    for route in paths["/documents/{doc_id}/variants/{name}"], \
            paths["/documents/{doc_id}/versions/{version}/variants/{name}"]:
        for method in ("get", "head"):
            assert set(route[method]["responses"]) >= {
                "200", "206", "304", "404", "415", "416", "422", "503"}
    assert "410" in paths["/documents/{doc_id}/versions/{version}/variants/{name}"]["get"][
        "responses"]


