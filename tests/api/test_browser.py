"""A browser uploads through tus: tus-js-client (npm, pinned, installed by ``scripts/test`` into
``.tools/``) in headless Chromium (Debian's ``chromium``, driven by Playwright), against a real
``serve`` on PostgreSQL and local disk, in chunks, then the document is read back."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from tests.support.server import fresh_database, running_server
from tests.support.services import Azurite

ROOT = Path(__file__).resolve().parents[2]
TUS_JS = ROOT / ".tools/tus-js-client/node_modules/tus-js-client/dist/tus.min.js"
CHROMIUM = os.environ.get("BLOBLEDGER_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SIZE = 3 * 1024 * 1024 + 4321

# The page builds SIZE bytes (byte i is (i * 31 + 7) mod 251), uploads them in 1 MiB PATCHes
# and answers the upload's URL.
UPLOAD = """
async ([size, name]) => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 31 + 7) % 251;
  const file = new Blob([bytes], {type: "text/plain"});
  return await new Promise((resolve, reject) => {
    const upload = new tus.Upload(file, {
      endpoint: "/files/", chunkSize: 1024 * 1024, retryDelays: [0, 500],
      metadata: {filename: name, filetype: "text/plain"},
      onError: (error) => reject(String(error)),
      onSuccess: () => resolve(upload.url),
    });
    upload.start();
  });
}
"""


def expected() -> bytes:
    return bytes((i * 31 + 7) % 251 for i in range(SIZE))


@pytest.fixture
def profile() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="blobledger-chromium-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(not Path(CHROMIUM).exists() or not TUS_JS.exists(),
                    reason="chromium or tus-js-client not installed (scripts/test installs them)")
def test_browser_uploads_through_tus(tmp_path: Path, azurite: Azurite, profile: str) -> None:
    from playwright.sync_api import sync_playwright

    env = {"BLOBLEDGER_STORE_URL": f"file://{tmp_path / 'store'}"}
    with fresh_database() as url, running_server(azurite, url, extra=env) as server, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(f"{server.url}/healthz")
            page.add_script_tag(path=str(TUS_JS))
            upload_url = page.evaluate(UPLOAD, [SIZE, "from-the-browser.txt"])
        finally:
            browser.close()
        assert isinstance(upload_url, str) and "/files/" in upload_url
        # the Location is a path: the client resolves it against the URL it used
        head = httpx.head(urljoin(server.url, upload_url), headers={"Tus-Resumable": "1.0.0"})
        doc_id = head.headers["Blobledger-Document"]
        doc = httpx.get(f"{server.url}/documents/{doc_id}").json()
        assert doc["name"] == "from-the-browser.txt" and doc["size"] == SIZE
        assert doc["sha256"] == hashlib.sha256(expected()).hexdigest()
        content = httpx.get(f"{server.url}/documents/{doc_id}/content").content
        assert content == expected()
