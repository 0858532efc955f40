"""What a web page on another origin can make a browser send, answered by the app as it is
embedded by default (no tokens): requests for a rebound name, CORS preflights, forms and
``no-cors`` fetches, frames; and the URLs the service hands out, which no ``Host`` builds.
In process (SQLite, a local store), as a browser would send them; ``test_browser.py`` sends
them from a real Chromium."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from blobledger import Ledger
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.stores.local import LocalStore
from tests.api.conftest import client_for, problem

#: the address the in-process server reports for its connections (``scope["server"]``)
BASE = "http://127.0.0.1:8000"
EVIL = "http://evil.example"


def tus(name: str = "tus.txt") -> dict[str, str]:
    """The headers of a tus creation of ``name``."""
    return {"Tus-Resumable": "1.0.0", "Upload-Length": "5",
            "Upload-Metadata": "filename " + base64.b64encode(name.encode()).decode()}


@pytest.fixture
async def open_ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    store = LocalStore(tmp_path / "store")
    settings = Settings(database_url=url, store_url=store.url, upload_deadline=60,
                        sweep_after=180, delete_grace=0)
    async with Ledger(Database(url), store, settings) as ledger:
        yield ledger


def client(ledger: Ledger, **changes: object) -> httpx.AsyncClient:
    instance = client_for(ledger, ledger.settings.with_(**changes) if changes else None)
    instance.base_url = httpx.URL(BASE)
    return instance


async def names(ledger: Ledger) -> list[str]:
    return [doc.name async for doc in ledger.list()]


# -- the Host allow-list -----------------------------------------------------------------------
NOT_LOOPBACK = ["rebind.attacker.example", "rebind.attacker.example:8000",
                "localhost.attacker.example", "127.0.0.1.nip.io:8000", "[::2]:8000", "",
                "local host", "localhost:80:80", "[::1"]


async def test_a_host_that_is_not_loopback_is_refused(open_ledger: Ledger) -> None:
    """DNS rebinding: a page whose name now resolves to 127.0.0.1 reads nothing, writes
    nothing."""
    await open_ledger.create("secret.txt", b"secret")
    async with client(open_ledger) as http:
        for host in NOT_LOOPBACK:
            read = await http.get("/documents", headers={"Host": host})
            problem(read, 400, "host-not-allowed")
            assert b"secret" not in read.content and read.headers["connection"] == "close"
            write = await http.post("/documents", params={"name": "rebound.txt"},
                                    content=b"x",
                                    headers={"Host": host, "Sec-Fetch-Site": "same-origin"})
            problem(write, 400, "host-not-allowed")
    assert await names(open_ledger) == ["secret.txt"]


async def test_two_host_headers_are_refused(open_ledger: Ledger) -> None:
    async with client(open_ledger) as http:
        response = await http.get("/healthz", headers=[("Host", "localhost"),
                                                       ("Host", "evil.example")])
    problem(response, 400, "host-not-allowed")


async def test_loopback_names_on_any_port_are_served(open_ledger: Ledger) -> None:
    async with client(open_ledger) as http:
        for host in ("localhost", "LOCALHOST:9", "localhost.", "127.0.0.1:1", "[::1]:8000",
                     "[0:0::1]"):
            response = await http.get("/documents", headers={"Host": host})
            assert response.status_code == 200, host


async def test_the_configured_hosts_replace_the_loopback_names(open_ledger: Ledger) -> None:
    async with client(open_ledger, allowed_hosts="docs.example.com, .corp.example") as http:
        for host in ("docs.example.com", "DOCS.example.com:443", "a.corp.example", "corp.example",
                     "127.0.0.1:8000"):  # the last: the address the connection came in on
            assert (await http.get("/healthz", headers={"Host": host})).status_code == 200, host
        for host in ("localhost", "evil.example", "xcorp.example", "docs.example.com.evil"):
            problem(await http.get("/healthz", headers={"Host": host}), 400, "host-not-allowed")
    async with client(open_ledger, allowed_hosts="*") as http:
        assert (await http.get("/healthz", headers={"Host": "any.example"})).status_code == 200
    async with client(open_ledger, public_url="https://files.example/base") as http:
        assert (await http.get("/healthz", headers={"Host": "files.example"})).status_code == 200


# -- CORS --------------------------------------------------------------------------------------
async def test_no_origin_is_ever_reflected(open_ledger: Ledger) -> None:
    """The tus preflight used to answer any origin with itself."""
    preflight = {"Origin": EVIL, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "tus-resumable,upload-length"}
    async with client(open_ledger) as http:
        for path in ("/files/", "/files/abc", "/documents"):
            response = await http.options(path, headers=preflight)
            assert "access-control-allow-origin" not in response.headers, (path, response)
        answered = await http.get("/documents", headers={"Origin": EVIL})
        assert "access-control-allow-origin" not in answered.headers


async def test_configured_origins_are_matched_exactly(open_ledger: Ledger) -> None:
    app_origin = "https://app.example"
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "tus-resumable,upload-length,authorization"}
    async with client(open_ledger, cors_origins=app_origin) as http:
        allowed = await http.options("/files/", headers={"Origin": app_origin, **preflight})
        assert allowed.headers["access-control-allow-origin"] == app_origin
        assert "tus-resumable" in allowed.headers["access-control-allow-headers"].lower()
        for other in (EVIL, "https://app.example.evil.example", "http://app.example", "null"):
            refused = await http.options("/files/", headers={"Origin": other, **preflight})
            assert "access-control-allow-origin" not in refused.headers, other
        created = await http.post("/files/", headers={**tus(), "Origin": app_origin,
                                                       "Sec-Fetch-Site": "cross-site"})
        assert created.status_code == 201, created.text
        assert created.headers["access-control-allow-origin"] == app_origin
        assert "location" in created.headers["access-control-expose-headers"].lower()


# -- state-changing requests from another site -------------------------------------------------
CROSS_SITE = [
    {"Sec-Fetch-Site": "cross-site", "Origin": EVIL},
    {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9000"},
    {"Origin": EVIL},  # a browser that sends no Sec-Fetch-Site
    {"Origin": "null"},  # a sandboxed frame or a file:// page
    {"Origin": "http://127.0.0.1:9000"},  # another port is another origin
]


async def test_a_cross_site_write_is_refused(open_ledger: Ledger) -> None:
    """What a plain form, a no-cors fetch or a beacon on another origin can send: 403, and
    nothing is created, reserved or run."""
    async with client(open_ledger) as http:
        for headers in CROSS_SITE:
            form = {"Content-Type": "application/x-www-form-urlencoded", **headers}
            problem(await http.post("/documents", params={"name": "form.txt"}, content=b"a=b",
                                    headers=form), 403, "cross-site-request")
            problem(await http.post("/documents", params={"name": "plain.txt"}, content=b"x",
                                    headers={"Content-Type": "text/plain", **headers}),
                    403, "cross-site-request")
            problem(await http.post("/files/", headers={**tus(), **headers}), 403,
                    "cross-site-request")
            problem(await http.post("/ops/doctor", headers=headers), 403,
                    "cross-site-request")
            problem(await http.post("/uploads", json={"name": "direct.txt", "size": 1},
                                    headers=headers), 403, "cross-site-request")
    assert await names(open_ledger) == []
    await open_ledger.create("tus.txt", b"never reserved")  # not reserved


OWN_SITE = [
    {},  # not a browser: the CLI, curl, tus clients
    {"Sec-Fetch-Site": "same-origin", "Origin": BASE},  # the service's own page
    {"Origin": BASE},
    {"Origin": "http://LOCALHOST:8000", "Host": "localhost:8000"},
    {"Sec-Fetch-Site": "none"},  # typed by the user
]


async def test_a_same_origin_or_non_browser_write_is_served(open_ledger: Ledger) -> None:
    async with client(open_ledger) as http:
        for number, headers in enumerate(OWN_SITE):
            created = await http.post("/documents", params={"name": f"{number}.txt"},
                                      content=b"x",
                                      headers={"Content-Type": "text/plain", **headers})
            assert created.status_code == 201, (headers, created.text)
            started = await http.post("/files/", headers={**tus(f"tus{number}.txt"),
                                                          **headers})
            assert started.status_code == 201, (headers, started.text)


# -- frames ------------------------------------------------------------------------------------
async def test_no_html_answer_can_be_framed(open_ledger: Ledger) -> None:
    async with client(open_ledger) as http:
        for path in ("/", "/docs"):
            response = await http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith("text/html"), path
            assert response.headers["x-frame-options"] == "DENY", path
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


# -- the URLs handed out -----------------------------------------------------------------------
async def test_the_urls_handed_out_are_not_built_from_the_host(open_ledger: Ledger) -> None:
    """A ``Host`` the allow-list accepts (another port) still builds no URL: the tus
    Location is a path, the direct-upload URL (which carries its token) names the address
    the connection came in on."""
    host = {"Host": "localhost:9999"}
    async with client(open_ledger) as http:
        created = await http.post("/files/", headers={**tus(), **host})
        assert created.status_code == 201, created.text
        assert created.headers["location"].startswith("/files/")
        direct = await http.post("/uploads", json={"name": "d.txt", "size": 1}, headers=host)
        assert direct.status_code == 201, direct.text
        assert direct.json()["url"].startswith(f"{BASE}/uploads/")
        assert direct.json()["complete_url"].startswith(f"{BASE}/uploads/")


async def test_the_urls_handed_out_use_the_public_url(open_ledger: Ledger) -> None:
    public = "https://files.example/base"
    async with client(open_ledger, public_url=public + "/") as http:
        created = await http.post("/files/", headers={**tus(), "Host": "localhost:9999"})
        assert created.headers["location"].startswith(f"{public}/files/")
        direct = await http.post("/uploads", json={"name": "d.txt", "size": 1},
                                 headers={"Host": "localhost:9999"})
        assert direct.json()["url"].startswith(f"{public}/uploads/")
        assert "token=" in direct.json()["url"]


# -- framing, for servers other than ``blobledger serve`` ----------------------------------------
async def test_ambiguous_framing_is_refused_by_the_app_too(open_ledger: Ledger) -> None:
    async with client(open_ledger) as http:
        response = await http.post("/documents", params={"name": "te.txt"}, content=b"5",
                                   headers={"Content-Length": "1",
                                            "Transfer-Encoding": "chunked"})
    problem(response, 400, "malformed-request")
    assert response.headers["connection"] == "close"
    assert await names(open_ledger) == []
