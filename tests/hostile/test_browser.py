"""A web page on another origin, open in the browser of someone running ``blobledger serve``
as it runs by default (no tokens, 127.0.0.1), can neither write nor read: a plain form, a
``no-cors`` fetch and a tus creation change nothing, and a name rebound to 127.0.0.1 (DNS
rebinding, here Chromium's host resolver rules) reads nothing. Headless Chromium (Debian's,
driven by Playwright) against a real ``serve``; the page comes from a second server on
another loopback port."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hostile.support import Served, serve
from tests.support.threaded import serving
from tests.web.conftest import CHROMIUM_FLAGS, chromium_path

pytestmark = pytest.mark.skipif(not Path(chromium_path()).is_file(),
                                reason="no Chromium (scripts/test installs Debian's chromium)")

REBOUND = "rebind.attacker.example"
PAGE = b"<!doctype html><html><head><title>elsewhere</title></head><body></body></html>"
SECRET = "secret-plans.txt"


class Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def service() -> Iterator[Served]:
    with serve() as served:
        httpx.post(f"{served.url}/documents", params={"name": SECRET},
                   content=b"not for you").raise_for_status()
        yield served


@pytest.fixture(scope="module")
def elsewhere() -> Iterator[str]:
    """Another origin: the same loopback address, another port."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Page)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True,
            args=[*CHROMIUM_FLAGS, f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
                  "--disable-features=LocalNetworkAccessChecks,"
                  "BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights"])
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def page(browser: Any, elsewhere: str) -> Iterator[Any]:
    context = browser.new_context()
    found = context.new_page()
    found.set_default_timeout(15_000)
    found.goto(f"{elsewhere}/page.html")
    try:
        yield found
    finally:
        context.close()


def names(service: Served) -> set[str]:
    return {item["name"] for item in httpx.get(f"{service.url}/documents").json()["items"]}


def test_a_plain_form_creates_nothing(service: Served, page: Any) -> None:
    action = f"{service.url}/documents?name=form.txt"
    with page.expect_response(lambda response: response.url == action) as answered:
        page.evaluate("""(action) => {
            const form = document.createElement("form");
            form.method = "POST"; form.enctype = "text/plain"; form.action = action;
            const field = document.createElement("input");
            field.name = "a"; field.value = "b";
            form.append(field); document.body.append(form); form.submit();
        }""", action)
    assert answered.value.status == 403
    assert "form.txt" not in names(service)


def test_a_no_cors_fetch_creates_nothing(service: Served, page: Any) -> None:
    kinds = page.evaluate("""async (base) => {
        const sent = [];
        for (const path of ["/documents?name=no-cors.txt", "/ops/doctor"]) {
            const response = await fetch(base + path, {method: "POST", mode: "no-cors",
                                                       body: "hello"});
            sent.push(response.type);
        }
        navigator.sendBeacon(base + "/documents?name=beacon.txt", "hello");
        await new Promise((resolve) => setTimeout(resolve, 300));
        return sent;
    }""", service.url)
    assert kinds == ["opaque", "opaque"]  # sent, and unreadable
    assert not {"no-cors.txt", "beacon.txt"} & names(service)


def test_a_tus_creation_is_never_sent(service: Served, page: Any) -> None:
    metadata = "filename " + base64.b64encode(b"tus.txt").decode()
    outcome = page.evaluate("""async ([base, metadata]) => {
        try {
            const response = await fetch(base + "/files/", {method: "POST", headers: {
                "Tus-Resumable": "1.0.0", "Upload-Length": "5", "Upload-Metadata": metadata}});
            return "answered " + response.status;
        } catch (error) {
            return "refused";
        }
    }""", [service.url, metadata])
    assert outcome == "refused"
    # had the creation been sent, it would hold the name for a day
    created = httpx.post(f"{service.url}/documents", params={"name": "tus.txt"}, content=b"x")
    assert created.status_code == 201, created.text


def test_a_page_reads_nothing_even_through_a_rebound_name(
        service: Served, page: Any) -> None:
    """Across origins the browser keeps the answer from the page; through a name rebound to
    127.0.0.1 the page is same-origin with the service, so the service must refuse it."""
    across = page.evaluate("""async (base) => {
        try { return await (await fetch(base + "/documents")).text(); }
        catch (error) { return "refused"; }
    }""", service.url)
    assert across == "refused"

    rebound = f"http://{REBOUND}:{service.port}"
    page.route(f"{rebound}/page.html", lambda route: route.fulfill(
        status=200, content_type="text/html", body=PAGE))
    page.goto(f"{rebound}/page.html")
    read, wrote = page.evaluate("""async () => {
        const read = await fetch("/documents");
        const wrote = await fetch("/documents?name=rebound.txt", {method: "POST",
                                                                  body: "hello"});
        return [[read.status, await read.text()], wrote.status];
    }""")
    assert read[0] == 400 and SECRET not in read[1], read
    assert wrote == 400
    assert "rebound.txt" not in names(service)
