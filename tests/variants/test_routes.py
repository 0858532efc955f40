"""``GET /documents/{id}/variants/{name}`` and ``/documents/{id}/versions/{v}/variants/{name}``
in process (SQLite + disk, PostgreSQL + Azurite): made on the first request, the same bytes to
two concurrent first requests, ETag and 304, immutable caching on a version's route and 410
once it is replaced, problem documents for what has no variant or is refused, and the read
scope."""

from __future__ import annotations

import asyncio

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


def test_the_routes_are_documented(ledger: Ledger) -> None:
    from blobledger.api import create_app

    paths = create_app(ledger).openapi()["paths"]
    assert set(paths["/documents/{doc_id}/variants/{name}"]["get"]["responses"]) >= {
        "200", "304", "404", "415", "422", "503"}
    assert "410" in paths["/documents/{doc_id}/versions/{version}/variants/{name}"]["get"][
        "responses"]


