"""A real ``blobledger serve`` (PostgreSQL + Azurite, bearer tokens, the sweeper inside) and
headless Chromium (Debian's ``chromium``, driven by Playwright's Python package; Playwright
never downloads a browser here). Screenshots of each view go to a temporary folder, printed
at the end (``BLOBLEDGER_SCREENSHOTS`` names another)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Error, Page, Playwright, sync_playwright

from tests.support.faultproxy import FaultProxy
from tests.support.server import Server, fresh_database, running_server
from tests.support.services import Azurite

READ_TOKEN = "read-token-for-the-page"
WRITE_TOKEN = "write-token-for-the-page"
#: creates buckets (the page itself only chooses among them)
ADMIN_TOKEN = "admin-token-for-the-page"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def chromium_path() -> str:
    return os.environ.get("BLOBLEDGER_CHROMIUM") or shutil.which("chromium") \
        or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def screenshots() -> Iterator[Path]:
    chosen = os.environ.get("BLOBLEDGER_SCREENSHOTS")
    folder = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="blobledger-screens-"))
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    print(f"\nscreenshots of the page: {folder}")


@pytest.fixture(scope="module")
def web_server(azurite: Azurite) -> Iterator[Server]:
    with fresh_database() as url, running_server(azurite, url, extra={
            "BLOBLEDGER_API_TOKENS": f"{READ_TOKEN}:read,{WRITE_TOKEN}:write,"
                                     f"{ADMIN_TOKEN}:admin",
            "BLOBLEDGER_SWEEP_INTERVAL": "2s"}) as server:
        yield server


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as instance:
        yield instance


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    path = chromium_path()
    if not Path(path).is_file():
        pytest.fail(f"no Chromium at {path}: scripts/test installs Debian's chromium "
                    "(apt-get install chromium), or set BLOBLEDGER_CHROMIUM", pytrace=False)
    failure = ""
    try:  # Playwright gives every launch a fresh, temporary user-data-dir
        instance = playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS,
                                              headless=True)
    except Error as exc:
        failure = (str(exc).strip().splitlines() or ["?"])[0]
    if failure:
        pytest.fail(f"Chromium at {path} did not start: {failure}", pytrace=False)
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    instance = browser.new_context(accept_downloads=True, viewport={"width": 1360,
                                                                    "height": 900})
    yield instance
    instance.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    found = context.new_page()
    found.set_default_timeout(30_000)
    return found


@pytest.fixture(scope="module")
def proxy(web_server: Server) -> Iterator[FaultProxy]:
    """The browser talks to the server through this proxy, which can drop a connection."""
    with FaultProxy(web_server.port) as instance:
        yield instance


@pytest.fixture
def base(proxy: FaultProxy) -> Iterator[str]:
    proxy.clear()
    yield f"http://127.0.0.1:{proxy.port}"
    proxy.clear()
