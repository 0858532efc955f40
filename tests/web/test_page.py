"""The page at ``/`` in headless Chromium against a real ``blobledger serve``: token, upload
(drag and drop, picking, a 64 MiB file whose connection is dropped and resumed), list,
search, paging, download, replace (and its conflict), delete, the operations view, and what
a read token can and cannot do. Each view's screenshot is saved (see ``conftest.py``)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from playwright.sync_api import BrowserContext, Page, expect

from blobledger.api.routes.ops import SERIES
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.stores.azure import AzureStore
from tests.conftest import run_sync
from tests.support.faultproxy import FaultProxy, Request
from tests.support.server import Server
from tests.web.conftest import ADMIN_TOKEN, READ_TOKEN, WRITE_TOKEN
from tests.web.support import api, by_name, create, row, sign_in, watch

BIG = 64 * 1024 * 1024
HOSTILE = '<img src=x onerror="window.__pwned=1">.txt'


def test_documents_upload_list_download_replace_delete(
    web_server: Server, base: str, page: Page, context: BrowserContext, tmp_path: Path,
    screenshots: Path,
) -> None:
    urls, complaints = watch(page, context)
    response = page.goto(f"{base}/")
    assert response is not None
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    expect(page.locator("#token-view")).to_be_visible()
    page.screenshot(path=str(screenshots / "token.png"))
    sign_in(page, base, WRITE_TOKEN, "upload")
    expect(page.locator("#who-scopes")).to_have_text("token: read, write")

    # upload: one file dropped, two picked; the names default to the files' names
    one = tmp_path / "ui-notes.txt"
    one.write_text("notes from the page\n")
    two = tmp_path / "ui-data.bin"
    two.write_bytes(os.urandom(1024 * 1024))
    page.evaluate("""() => {
        const data = new DataTransfer();
        data.items.add(new File(["dropped bytes\\n"], "ui-dropped.txt", {type: "text/plain"}));
        document.getElementById("drop").dispatchEvent(
            new DragEvent("drop", {dataTransfer: data, bubbles: true, cancelable: true}));
    }""")
    page.set_input_files("#pick", [str(one), str(two)])
    queue = page.locator("#queue li")
    expect(queue).to_have_count(3)
    expect(queue.nth(0).locator("input[type=text]")).to_have_value("ui-dropped.txt")
    expect(queue.nth(2).locator("input[type=text]")).to_have_value("ui-data.bin")
    queue.nth(1).locator("input[type=text]").fill("ui-renamed-notes.txt")
    page.click("#start-all")
    expect(page.locator("#queue li[data-state=done]")).to_have_count(3, timeout=60_000)
    page.screenshot(path=str(screenshots / "upload.png"), full_page=True)
    assert {d["name"] for d in by_name(web_server, "ui-")} == {
        "ui-dropped.txt", "ui-renamed-notes.txt", "ui-data.bin"}

    # a hostile name is text, never markup
    create(web_server, HOSTILE, b"<script>window.__pwned=2</script>", "text/html")
    for i in range(12):
        create(web_server, f"paged/{i:03d}.txt", f"{i}\n".encode())

    page.goto(f"{base}/#documents")
    expect(row(page, HOSTILE)).to_have_count(1)
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("#doc-rows img").count() == 0
    expect(row(page, HOSTILE).locator("a", has_text="View")).to_have_count(0)  # HTML: no view

    # search by prefix, then page through with the API's cursor
    page.select_option("#limit", "10")
    page.fill("#prefix", "paged/")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#doc-rows tr")).to_have_count(10)
    expect(page.locator("#doc-rows tr").first.locator("td.name")).to_have_text("paged/000.txt")
    page.click("#next-page")
    expect(page.locator("#doc-rows tr")).to_have_count(2)
    expect(page.locator("#doc-rows tr").first.locator("td.name")).to_have_text("paged/010.txt")
    expect(page.locator("#next-page")).to_be_disabled()
    page.click("#prev-page")
    expect(page.locator("#doc-rows tr")).to_have_count(10)

    page.fill("#prefix", "ui-")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#doc-rows tr")).to_have_count(3)
    notes = row(page, "ui-renamed-notes.txt")
    expect(notes.locator("td").nth(3)).to_have_text("1")
    expect(notes.locator("td").nth(2)).to_have_text("text/plain")
    digest = hashlib.sha256(one.read_bytes()).hexdigest()
    assert notes.locator("td").nth(4).get_attribute("title") == digest

    # download
    with page.expect_download() as caught:
        notes.locator("a[download]", has_text="Download").click()
    saved = tmp_path / "downloaded.txt"
    caught.value.save_as(saved)
    assert saved.read_bytes() == one.read_bytes()
    assert caught.value.suggested_filename == "ui-renamed-notes.txt"

    # replace with the version as If-Match
    new = tmp_path / "ui-notes-v2.txt"
    new.write_text("second version\n")
    with page.expect_file_chooser() as chooser:
        notes.locator("button", has_text="Replace").click()
    chooser.value.set_files(str(new))
    expect(page.locator("#documents-message")).to_have_text(re.compile("now version 2"))
    expect(notes.locator("td").nth(3)).to_have_text("2")

    # a replace from a stale list is refused with a clear message
    doc_id = next(d["id"] for d in by_name(web_server, "ui-renamed-notes.txt"))
    with api(web_server) as client:
        changed = client.put(f"/documents/{doc_id}/content", content=b"changed elsewhere\n",
                             headers={"If-Match": '"2"', "Content-Type": "text/plain"})
    assert changed.status_code == 200, changed.text
    with page.expect_file_chooser() as chooser:
        notes.locator("button", has_text="Replace").click()
    chooser.value.set_files(str(one))
    expect(page.locator("#documents-message")).to_have_text(re.compile(
        "Not replaced: .*changed by someone else.*now at version 3"))
    expect(page.locator("#documents-message")).to_have_class(re.compile("error"))
    expect(notes.locator("td").nth(3)).to_have_text("3")

    # delete, after a confirmation (cancel first)
    dropped = row(page, "ui-dropped.txt")
    dropped.locator("button", has_text="Delete").click()
    expect(page.locator("#confirm-delete")).to_be_visible()
    expect(page.locator("#delete-name")).to_have_text("ui-dropped.txt")
    page.click("#delete-cancel")
    expect(dropped).to_have_count(1)
    dropped.locator("button", has_text="Delete").click()
    page.screenshot(path=str(screenshots / "delete-confirmation.png"))
    page.click("#delete-confirm")
    expect(page.locator("#documents-message")).to_have_text("Deleted ui-dropped.txt.")
    expect(dropped).to_have_count(0)
    assert [d["name"] for d in by_name(web_server, "ui-dropped")] == []

    page.fill("#prefix", "")
    page.click("#search-form button[type=submit]")
    expect(row(page, HOSTILE)).to_have_count(1)
    page.screenshot(path=str(screenshots / "documents.png"), full_page=True)

    assert not complaints, complaints
    assert not [u for u in urls if WRITE_TOKEN in u], "the token appeared in a URL"


def test_operations_view(
    web_server: Server, base: str, page: Page, context: BrowserContext, screenshots: Path,
) -> None:
    _, complaints = watch(page, context)
    run_sync(_stuck_intent(web_server, "ops/stuck-upload.bin"))
    create(web_server, "ops/ready.txt", b"ready\n")
    sign_in(page, base, WRITE_TOKEN, "operations")
    expect(page.locator("#pending-count")).to_have_text(re.compile(r"\(([1-9]\d*)\)"))
    expect(page.locator("#pending-rows")).to_contain_text("ops/stuck-upload.bin")
    expect(page.locator("#pending-chart svg rect")).to_have_count(6)
    expect(page.locator("#deleting-count")).to_have_text(re.compile(r"\(\d+\)"))
    # the sweeper runs inside serve every 2 s: its summary shows up
    expect(page.locator("#sweep-summary")).to_contain_text("claimed", timeout=20_000)
    # each background worker's state: the sweeper runs, and has completed a run
    sweeper = page.locator("#worker-rows tr", has_text="sweeper")
    expect(sweeper).to_contain_text("running")
    expect(sweeper.locator("td").nth(3)).to_contain_text("ago")
    expect(page.locator("#charts .chart")).to_have_count(len(SERIES))
    expect(page.locator("#charts .chart[data-series=creates] h4")).to_have_text(
        re.compile(r"Documents created: [1-9]"))

    page.click("#run-check")
    expect(page.locator("#check-verdict")).to_have_text("No violations.", timeout=60_000)
    page.click("#run-reconcile")
    expect(page.locator("#reconcile-summary")).to_contain_text("blobs", timeout=60_000)
    page.click("#run-doctor")
    expect(page.locator("#doctor-verdict")).to_have_text(
        re.compile("all must-have checks passed"), timeout=60_000)
    assert page.locator("#doctor-rows tr").count() >= 4
    page.screenshot(path=str(screenshots / "operations.png"), full_page=True)
    assert not complaints, complaints


async def _stuck_intent(server: Server, name: str) -> None:
    """A create that recorded its intent and then died: a pending row the page shows."""
    ledger = Ledger(Database(server.database_url), AzureStore(
        server.container, connection_string=server.env["BLOBLEDGER_AZURE_CONNECTION_STRING"]))
    try:
        await ledger.begin_create(name, "application/octet-stream")
    finally:
        await ledger.close()


def test_a_read_token_cannot_change_anything(
    web_server: Server, base: str, page: Page, context: BrowserContext, screenshots: Path,
) -> None:
    urls, complaints = watch(page, context)
    doc = create(web_server, "readonly/kept.txt", b"kept\n")
    sign_in(page, base, READ_TOKEN)
    expect(page.locator("#who-scopes")).to_have_text("token: read")
    page.fill("#prefix", "readonly/")
    page.click("#search-form button[type=submit]")
    kept = row(page, "readonly/kept.txt")
    expect(kept).to_have_count(1)
    expect(kept.locator("a[download]", has_text="Download")).to_have_count(1)
    # a type the service sends inline is viewed in a tab of its own, through a link
    with context.expect_page() as opened:
        kept.locator("a[target=_blank]", has_text="View").click()
    shown = opened.value
    shown.wait_for_load_state()
    assert shown.locator("body").inner_text().strip() == "kept"
    assert "/link" not in shown.url and READ_TOKEN not in shown.url
    shown.close()
    expect(kept.locator("button", has_text="Replace")).to_have_count(0)
    expect(kept.locator("button", has_text="Delete")).to_have_count(0)
    expect(page.locator("nav a[data-view=upload]")).to_be_hidden()
    page.goto(f"{base}/#upload")
    expect(page.locator("#upload")).to_be_hidden()
    expect(page.locator("#documents")).to_be_visible()
    page.goto(f"{base}/#operations")
    expect(page.locator("#run-doctor")).to_be_hidden()
    page.click("#run-check")
    expect(page.locator("#check-verdict")).to_have_text("No violations.", timeout=60_000)
    page.screenshot(path=str(screenshots / "operations-read-token.png"), full_page=True)

    # even a request made by hand from the page is refused by the service
    statuses = page.evaluate("""async (id) => {
        const auth = {Authorization: "Bearer " + sessionStorage.getItem("blobledger.token")};
        const del = await fetch("/documents/" + id, {method: "DELETE", headers: auth});
        const put = await fetch("/documents/" + id + "/content",
            {method: "PUT", headers: {...auth, "If-Match": "*"}, body: "x"});
        const post = await fetch("/documents?name=readonly/new.txt",
            {method: "POST", headers: auth, body: "x"});
        const doctor = await fetch("/ops/doctor", {method: "POST", headers: auth});
        return [del.status, put.status, post.status, doctor.status];
    }""", doc["id"])
    assert statuses == [403, 403, 403, 403]
    assert [d["name"] for d in by_name(web_server, "readonly/")] == ["readonly/kept.txt"]
    assert not complaints, complaints
    assert not [u for u in urls if READ_TOKEN in u], "the token appeared in a URL"


def test_big_upload_paused_dropped_and_resumed_through_tus(
    web_server: Server, base: str, proxy: FaultProxy, page: Page, tmp_path: Path,
    screenshots: Path,
) -> None:
    """64 MiB through tus in 8 MiB parts: paused and resumed by hand, then a connection
    dropped halfway through a part; the upload resumes from the server's offset."""
    big = tmp_path / "big-resumable.bin"
    big.write_bytes(os.urandom(BIG))
    patches: list[Request] = []
    heads: list[Request] = []

    def third_part(request: Request) -> bool:
        # the third part's request and the next three attempts (Chromium silently retries a
        # dropped request once itself; tus-js-client then asks the offset and retries)
        if request.method == "HEAD" and request.path.startswith("/files/"):
            heads.append(request)
        if request.method == "PATCH" and request.path.startswith("/files/"):
            patches.append(request)
            return 3 <= len(patches) <= 6
        return False

    proxy.add(third_part, "reset_request", times=4)
    sign_in(page, base, WRITE_TOKEN, "upload")
    expect(page.locator("#transport")).to_contain_text("Resumable uploads (tus 1.0)")
    page.set_input_files("#pick", str(big))
    item = page.locator("#queue li")
    item.locator("button[data-action=start]").click()
    expect(item.locator("progress")).not_to_have_attribute("value", "0", timeout=60_000)
    item.locator("button[data-action=pause]").click()
    expect(item).to_have_attribute("data-state", "paused")
    page.screenshot(path=str(screenshots / "upload-paused.png"), full_page=True)
    item.locator("button[data-action=resume]").click()
    expect(item).to_have_attribute("data-state", "done", timeout=180_000)
    assert proxy.injected["reset_request"] == 4
    assert heads, "tus-js-client never asked the server for the offset"
    assert len(patches) < BIG // (8 * 1024 * 1024) + 8, "the upload started over"
    [doc] = by_name(web_server, "big-resumable.bin")
    assert doc["size"] == BIG
    assert doc["sha256"] == hashlib.sha256(big.read_bytes()).hexdigest()


def test_the_bucket_selector_lists_and_uploads_in_the_chosen_bucket(
    web_server: Server, base: str, page: Page, tmp_path: Path,
) -> None:
    with api(web_server, ADMIN_TOKEN) as admin:
        assert admin.post("/buckets", json={"name": "ui-photos"}).status_code == 201
    create(web_server, "ui-in-default.txt", b"default")
    sign_in(page, base, WRITE_TOKEN)
    expect(row(page, "ui-in-default.txt")).to_have_count(1)
    page.select_option("#bucket", "ui-photos")
    expect(page.locator("#doc-empty")).to_be_visible()
    page.goto(f"{base}/#upload")  # the upload view sends to the bucket chosen
    picked = tmp_path / "ui-in-photos.txt"
    picked.write_text("a photo's caption\n")
    page.set_input_files("#pick", [str(picked)])
    page.click("#start-all")
    expect(page.locator("#queue li[data-state=done]")).to_have_count(1, timeout=60_000)
    page.goto(f"{base}/#documents")
    expect(row(page, "ui-in-photos.txt")).to_have_count(1)
    expect(row(page, "ui-in-default.txt")).to_have_count(0)
    with api(web_server) as client:
        listed = client.get("/buckets/ui-photos/documents").json()["items"]
    assert [d["name"] for d in listed] == ["ui-in-photos.txt"]
    assert not by_name(web_server, "ui-in-photos")
