"""The page at a desktop's size (1280x800) and a phone's (375x667, touch): a refused upload
(a taken name) is shown at once and never retried, and the form stays usable; a 503 is
retried after its Retry-After; a view's banner stays with its view; long names wrap only
at separators, with the whole name as a tooltip, and change no other row; no view scrolls
sideways; a multi-MiB download is a plain link the browser streams to disk. Screenshots go
where ``conftest.py`` says, named by test and size."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, expect

from tests.support.faultproxy import FaultProxy, Request
from tests.support.server import Server
from tests.web.conftest import WRITE_TOKEN
from tests.web.support import api, by_name, create, row, sign_in

SIZES: dict[str, ViewportSize] = {"desktop": {"width": 1280, "height": 800},
                                  "phone": {"width": 375, "height": 667}}
SEPARATORS = "/-_.+;,:=@ "
LONG_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# every time an upload's status line changes, its text
RECORD_STATES = """() => {
  window.__states = [];
  new MutationObserver(() => document.querySelectorAll("#queue .state")
      .forEach((s) => window.__states.push(s.textContent)))
    .observe(document.getElementById("queue"), {subtree: true, childList: true,
                                                characterData: true});
}"""

# where a cell's text goes to the next line: the character before each line break
LINE_BREAKS = """(cell) => {
  const chars = [];
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      chars.push([node.data[i], range.getBoundingClientRect().top]);
    }
  }
  const breaks = [];
  for (let i = 1; i < chars.length; i++) {
    if (chars[i][1] > chars[i - 1][1] + 2) breaks.push(chars[i - 1][0]);
  }
  return breaks;
}"""


@pytest.fixture(params=list(SIZES))
def size(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sized(browser: Browser, size: str) -> Iterator[Page]:
    phone = size == "phone"
    context: BrowserContext = browser.new_context(
        accept_downloads=True, viewport=SIZES[size], is_mobile=phone, has_touch=phone)
    page = context.new_page()
    page.set_default_timeout(30_000)
    yield page
    context.close()


def no_sideways_scroll(page: Page) -> None:
    width, inner = page.evaluate(
        "() => [document.scrollingElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"the page scrolls sideways: {width} > {inner}"


def go(page: Page, view: str) -> None:
    page.click(f"nav a[data-view={view}]")
    expect(page.locator(f"#{view}")).to_be_visible()


def tus_refusal(server: Server, name: str, length: int) -> dict[str, object]:
    """What the service answers a tus upload under ``name`` (taken): the problem shown."""
    encoded = base64.b64encode(name.encode()).decode()
    with api(server) as client:
        response = client.post("/files/", headers={
            "Tus-Resumable": "1.0.0", "Upload-Length": str(length),
            "Upload-Metadata": f"name {encoded}"})
    assert response.status_code == 409, response.text
    return dict(response.json())


def test_a_refused_upload_shows_at_once_and_the_form_stays_usable(
    web_server: Server, base: str, sized: Page, size: str, tmp_path: Path,
    screenshots: Path,
) -> None:
    page = sized
    taken = f"taken-{size}/report.txt"
    create(web_server, taken, b"already here\n")
    upload = tmp_path / "report.txt"
    upload.write_bytes(b"the new report\n" * 1000)
    refusal = tus_refusal(web_server, taken, upload.stat().st_size)
    creations: list[str] = []
    page.on("request", lambda r: creations.append(r.url)
            if r.method == "POST" and "/files/" in r.url else None)

    sign_in(page, base, WRITE_TOKEN, "upload")
    page.evaluate(RECORD_STATES)
    page.set_input_files("#pick", str(upload))
    item = page.locator("#queue li")
    name = item.locator("input[type=text]")
    name.fill(taken)
    started = time.monotonic()
    item.locator("button[data-action=start]").click()
    expect(item).to_have_attribute("data-state", "failed", timeout=5_000)
    took = time.monotonic() - started
    status = item.locator(".state")
    expect(status).to_have_text(f"Refused (409): {refusal['detail']}")
    expect(status).to_have_class("state error")
    assert took < 5, f"the refusal took {took:.1f} s to show"  # it was ~19 s of retries
    page.wait_for_timeout(1500)  # nothing retries it behind the user's back
    assert len(creations) == 1, creations
    states: list[str] = page.evaluate("() => window.__states")
    assert not [s for s in states if "resuming" in s or "Connection lost" in s], states
    expect(item).to_have_attribute("data-state", "failed")
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / f"upload-refused-{size}.png"), full_page=True)

    # the name field is usable again: another name, Retry, and it is uploaded
    expect(name).to_be_enabled()
    expect(item.locator("button[data-action=retry]")).to_be_visible()
    renamed = f"taken-{size}/report-2.txt"
    name.fill(renamed)
    item.locator("button[data-action=retry]").click()
    expect(item).to_have_attribute("data-state", "done", timeout=30_000)
    expect(name).to_be_disabled()
    assert len(creations) == 2, creations
    [doc] = by_name(web_server, renamed)
    assert doc["sha256"] == hashlib.sha256(upload.read_bytes()).hexdigest()
    [kept] = by_name(web_server, taken)
    assert kept["version"] == 1 and kept["size"] == len(b"already here\n")
    page.screenshot(path=str(screenshots / f"upload-retried-{size}.png"), full_page=True)


def test_a_busy_service_is_retried_after_its_retry_after(
    web_server: Server, base: str, proxy: FaultProxy, sized: Page, size: str, tmp_path: Path,
) -> None:
    page = sized
    seen: list[tuple[str, str, float]] = []

    def record(request: Request) -> bool:  # matches nothing: sees every request
        seen.append((request.method, request.path, time.monotonic()))
        return False

    injected = proxy.injected["status"]
    proxy.add(record, "hang", times=1_000_000)
    proxy.add(lambda r: r.method == "PATCH" and r.path.startswith("/files/"), "status:503:2")
    upload = tmp_path / "busy.bin"
    upload.write_bytes(os.urandom(256 * 1024))
    sign_in(page, base, WRITE_TOKEN, "upload")
    page.set_input_files("#pick", str(upload))
    item = page.locator("#queue li")
    item.locator("input[type=text]").fill(f"busy-{size}/busy.bin")
    item.locator("button[data-action=start]").click()
    expect(item.locator(".state")).to_contain_text("answered 503", timeout=10_000)
    expect(item.locator(".state")).to_contain_text("resuming in 2 s")
    expect(item).to_have_attribute("data-state", "done", timeout=30_000)
    assert proxy.injected["status"] == injected + 1
    refused = next(i for i, (method, path, _) in enumerate(seen)
                   if method == "PATCH" and path.startswith("/files/"))
    waited = seen[refused + 1][2] - seen[refused][2]
    assert waited >= 1.9, f"retried after {waited:.2f} s, before the Retry-After of 2 s"
    [doc] = by_name(web_server, f"busy-{size}/busy.bin")
    assert doc["sha256"] == hashlib.sha256(upload.read_bytes()).hexdigest()


def test_a_banner_stays_with_its_view(
    web_server: Server, base: str, proxy: FaultProxy, sized: Page, size: str,
    screenshots: Path,
) -> None:
    page = sized
    name = f"banner-{size}/changed.txt"
    doc = create(web_server, name, b"first\n")
    sign_in(page, base, WRITE_TOKEN)
    page.fill("#prefix", f"banner-{size}/")
    page.click("#search-form button[type=submit]")
    expect(row(page, name)).to_have_count(1)
    with api(web_server) as client:  # changed elsewhere: the page's delete is refused
        changed = client.put(f"/documents/{doc['id']}/content", content=b"second\n",
                             headers={"If-Match": '"1"', "Content-Type": "text/plain"})
    assert changed.status_code == 200, changed.text
    row(page, name).locator("button", has_text="Delete").click()
    page.click("#delete-confirm")
    documents_banner = page.locator("#documents-message")
    expect(documents_banner).to_have_text(f"Not deleted: {name}: it was changed by someone "
                                          "else since this list was loaded; look again")
    expect(documents_banner).to_have_class("message error")
    page.screenshot(path=str(screenshots / f"banner-documents-{size}.png"), full_page=True)
    visible_errors = page.locator(".message.error:visible")

    for view in ("upload", "operations"):
        go(page, view)
        expect(visible_errors).to_have_count(0)
        expect(documents_banner).to_be_hidden()
        no_sideways_scroll(page)

    # the operations view's own trouble shows there, and nowhere else
    proxy.add(lambda r: r.path == "/ops/overview", "status:500", times=1000)
    page.click("#ops-refresh")
    operations_banner = page.locator("#operations-message")
    expect(operations_banner).to_have_text("Could not load the operations view: HTTP 500")
    expect(visible_errors).to_have_count(1)
    page.screenshot(path=str(screenshots / f"banner-operations-{size}.png"), full_page=True)
    for view in ("documents", "upload"):
        go(page, view)
        expect(visible_errors).to_have_count(0)
        expect(operations_banner).to_be_hidden()
    page.wait_for_timeout(5500)  # the operations view polls only while it is shown
    expect(visible_errors).to_have_count(0)
    proxy.clear()
    go(page, "operations")
    expect(page.locator("#ops-time")).to_have_text(re.compile(r"^as of \d{4}-"))
    expect(visible_errors).to_have_count(0)


def test_long_names_wrap_at_separators_and_change_no_other_row(
    web_server: Server, base: str, sized: Page, size: str, screenshots: Path,
) -> None:
    page = sized
    prefix = f"wrap-{size}/"
    short = [f"{prefix}s-a.txt", f"{prefix}s-b-notes.md", f"{prefix}s-c.txt"]
    long_name = (f"{prefix}t-quarterly-reports/2026/finance_department/a-very-long-file-name-"
                 "that-goes-on-and-on-with-many-separators.final.version.pdf")
    endless = f"{prefix}u-" + "x" * 90 + ".bin"
    for name in short:
        create(web_server, name, b"short\n")
    sign_in(page, base, WRITE_TOKEN)
    page.fill("#prefix", f"{prefix}s-")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#doc-rows tr")).to_have_count(3)
    alone = [row(page, n).bounding_box() for n in short]

    create(web_server, long_name, b"long\n", "application/pdf")
    create(web_server, endless, b"endless\n", LONG_TYPE)
    page.fill("#prefix", prefix)
    page.click("#search-form button[type=submit]")
    expect(page.locator("#doc-rows tr")).to_have_count(5)
    with_long = [row(page, n).bounding_box() for n in short]
    for before, after in zip(alone, with_long, strict=True):
        assert before is not None and after is not None
        assert abs(before["height"] - after["height"]) < 1, (alone, with_long)
        assert abs(before["width"] - after["width"]) < 1, (alone, with_long)

    for name in (*short, long_name, endless):
        cell = row(page, name).locator("td.name")
        expect(cell).to_have_attribute("title", name)
        expect(cell).to_have_text(name)  # whole in the page; cut only on screen
    long_cell = row(page, long_name).locator("td.name")
    breaks: list[str] = long_cell.evaluate(LINE_BREAKS)
    assert breaks, "the long name did not wrap at this width"
    assert all(b in SEPARATORS for b in breaks), f"a name broke inside a word: {breaks}"
    endless_cell = row(page, endless).locator("td.name")
    assert all(b in SEPARATORS for b in endless_cell.evaluate(LINE_BREAKS))
    assert endless_cell.evaluate("(c) => c.scrollWidth > c.clientWidth"), \
        "the endless part is not cut"
    assert endless_cell.evaluate("(c) => getComputedStyle(c).textOverflow") == "ellipsis"
    kind = row(page, endless).locator("td.type")
    expect(kind).to_have_attribute("title", LONG_TYPE)
    assert all(b in SEPARATORS for b in kind.evaluate(LINE_BREAKS))
    # nothing but a name or a type is ever cut
    clipped = page.evaluate("""() => [...document.querySelectorAll(
        "#doc-rows td:not(.name):not(.type):not(.sha)")]
        .filter((td) => td.scrollWidth > td.clientWidth + 1).map((td) => td.textContent)""")
    assert clipped == [], clipped
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / f"long-names-{size}.png"), full_page=True)

    # the delete confirmation shows the long name wrapped the same way
    row(page, long_name).locator("button", has_text="Delete").click()
    dialog_name = page.locator("#delete-name")
    expect(dialog_name).to_have_text(long_name)
    assert all(b in SEPARATORS for b in dialog_name.evaluate(LINE_BREAKS))
    no_sideways_scroll(page)
    page.click("#delete-cancel")

    # the upload queue and the operations view, with a long name, at this size too
    go(page, "upload")
    page.evaluate("""(name) => {
        const data = new DataTransfer();
        data.items.add(new File(["x"], name, {type: "text/plain"}));
        document.getElementById("drop").dispatchEvent(
            new DragEvent("drop", {dataTransfer: data, bubbles: true, cancelable: true}));
    }""", long_name.rsplit("/", 1)[-1])
    expect(page.locator("#queue li")).to_have_count(1)
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / f"upload-queue-{size}.png"), full_page=True)
    go(page, "operations")
    expect(page.locator("#charts .chart").first).to_be_visible()
    no_sideways_scroll(page)
    page.screenshot(path=str(screenshots / f"operations-{size}.png"), full_page=True)


def test_a_download_is_a_plain_link_streamed_to_disk(
    web_server: Server, base: str, sized: Page, size: str, tmp_path: Path, screenshots: Path,
) -> None:
    page = sized
    data = os.urandom(6 * 1024 * 1024 + 123)
    name = f"download-{size}/big.bin"
    doc = create(web_server, name, data, "application/octet-stream")
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    page.goto(f"{base}/")
    expect(page.locator("#token-view")).to_be_visible()
    no_sideways_scroll(page)
    sign_in(page, base, WRITE_TOKEN)
    page.fill("#prefix", f"download-{size}/")
    page.click("#search-form button[type=submit]")
    page.wait_for_load_state("networkidle")  # the sign-in's own load of the list is done too
    expect(page.locator("#doc-rows tr")).to_have_count(1)
    link = row(page, name).locator("a[download]", has_text="Download")
    expect(link).to_have_attribute("href", f"/documents/{doc['id']}/content")
    no_sideways_scroll(page)
    clicked = link.element_handle()  # the very link (a later load of the list renders anew)
    with page.expect_download(timeout=60_000) as caught:
        clicked.click()
    saved = tmp_path / "saved.bin"
    caught.value.save_as(saved)
    assert caught.value.failure() is None
    assert caught.value.suggested_filename == "big.bin"
    assert saved.read_bytes() == data
    # the browser fetched it as a download: the page's scripts never held its bytes
    href = clicked.get_attribute("href") or ""
    assert href.startswith(f"/documents/{doc['id']}/content?") and "sig=" in href
    assert WRITE_TOKEN not in href and not [u for u in urls if WRITE_TOKEN in u]
    assert not [u for u in urls if u.startswith("blob:")]
    fetched = page.evaluate("""() => performance.getEntriesByType("resource")
        .map((e) => e.name).filter((n) => n.includes("/content"))""")
    assert fetched == [], fetched
    expect(page.locator("#documents-message")).to_have_text(
        f"Downloading {name}: the browser shows its progress.")
    page.screenshot(path=str(screenshots / f"download-{size}.png"), full_page=True)
