"""What the page's tests share: the service's API (to set up and to check what the page
did), signing in, watching the page's requests, finding a document's row."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.support.server import Server
from tests.web.conftest import WRITE_TOKEN


def api(server: Server, token: str = WRITE_TOKEN) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=60,
                        headers={"Authorization": f"Bearer {token}"})


def create(server: Server, name: str, data: bytes, content_type: str = "text/plain") -> dict[
        str, object]:
    with api(server) as client:
        response = client.post("/documents", params={"name": name}, content=data,
                               headers={"Content-Type": content_type})
    assert response.status_code == 201, response.text
    return dict(response.json())


def by_name(server: Server, prefix: str) -> list[dict[str, object]]:
    with api(server) as client:
        response = client.get("/documents", params={"prefix": prefix, "limit": 1000})
    assert response.status_code == 200, response.text
    return list(response.json()["items"])


def sign_in(page: Page, base: str, token: str, view: str = "documents") -> None:
    page.goto(f"{base}/#{view}")
    expect(page.locator("#token-view")).to_be_visible()
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def watch(page: Page, context: BrowserContext) -> tuple[list[str], list[str]]:
    """Every URL the page requests, and any Content Security Policy complaint or page error."""
    urls: list[str] = []
    complaints: list[str] = []
    context.on("request", lambda request: urls.append(request.url))
    page.on("console", lambda message: complaints.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.on("pageerror", lambda error: complaints.append(str(error)))
    return urls, complaints


def row(page: Page, name: str) -> Locator:
    return page.locator("#doc-rows tr").filter(
        has=page.locator("td.name", has_text=re.compile("^" + re.escape(name) + "$")))
