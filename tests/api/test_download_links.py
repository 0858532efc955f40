"""``GET /documents/{id}/link``: a link to one document's content that opens it without an
``Authorization`` header (what the page's plain ``<a href download>`` follows), for that
document alone, until it expires or its token is gone; never the token itself."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from blobledger import Ledger
from blobledger.api import links
from tests.api.conftest import client_for, problem
from tests.conftest import ONE_BACKEND

READER = {"Authorization": "Bearer reader-token"}
TOKENS = {"reader-token": frozenset({"read"}), "writer-token": frozenset({"read", "write"})}


def _tokens(ledger: Ledger, tokens: dict[str, frozenset[str]]) -> Ledger:
    return Ledger(ledger.db, ledger.store, ledger.settings.with_(api_tokens=tokens))


async def test_a_link_opens_its_document_alone_until_it_expires(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    gated = _tokens(ledger, TOKENS)
    doc = await ledger.create("links/report.txt", b"the report\n")
    other = await ledger.create("links/other.txt", b"another\n")
    async with client_for(gated, gated.settings) as client:
        problem(await client.get(f"/documents/{doc.id}/link"), 401, "unauthorized")
        problem(await client.get("/documents/no-such-id/link", headers=READER), 404)
        answer = await client.get(f"/documents/{doc.id}/link", headers=READER)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["expires_in"] == links.LIFETIME
        url = body["url"]
        assert url.startswith(f"/documents/{doc.id}/content?") and "reader-token" not in url

        got = await client.get(url)  # no Authorization header
        assert got.status_code == 200 and got.content == b"the report\n"
        assert "report.txt" in got.headers["content-disposition"]
        assert (await client.head(url)).status_code == 200
        ranged = await client.get(url, headers={"Range": "bytes=4-9"})
        assert ranged.status_code == 206 and ranged.content == b"report"

        # another document, a changed signature or expiry, a missing part: refused
        query = parse_qs(urlsplit(url).query)
        problem(await client.get(f"/documents/{other.id}/content?{urlsplit(url).query}"),
                401, "unauthorized")
        tampered = url.replace(query["sig"][0], "0" * 64)
        problem(await client.get(tampered), 401, "unauthorized")
        later = int(query["expires"][0]) + 1
        problem(await client.get(url.replace(f"expires={query['expires'][0]}",
                                             f"expires={later}")), 401, "unauthorized")
        problem(await client.get(url.split("&sig=")[0] + "&sig="), 401, "unauthorized")
        # the link serves reads only: it gives no scope to the other routes
        problem(await client.get(f"/documents/{doc.id}?{urlsplit(url).query}"), 401)
        problem(await client.delete(f"/documents/{doc.id}/content?{urlsplit(url).query}"),
                405)

        # expired
        now = time.time()
        monkeypatch.setattr(time, "time", lambda: now + links.LIFETIME + 5)
        problem(await client.get(url), 401, "unauthorized")

    # a token no longer configured: its links no longer open anything
    others = _tokens(ledger, {"writer-token": frozenset({"read", "write"})})
    async with client_for(others, others.settings) as client:
        problem(await client.get(url), 401, "unauthorized")


@pytest.mark.parametrize("backend", ONE_BACKEND, indirect=True)
async def test_a_link_without_tokens_is_the_plain_url(ledger: Ledger) -> None:
    doc = await ledger.create("links/open.txt", b"open\n")
    async with client_for(ledger) as client:
        body = (await client.get(f"/documents/{doc.id}/link")).json()
        assert body == {"url": f"/documents/{doc.id}/content", "expires_in": None}
        assert (await client.get(body["url"])).content == b"open\n"
