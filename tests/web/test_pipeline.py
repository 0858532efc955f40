"""The page's pipeline in headless Chromium against a real ``blobledger serve`` (PostgreSQL
+ Azurite) that holds documents for the content-type check, makes ``thumb`` variants and
sends its events to a receiver (verifying with the ``standardwebhooks`` package) that
refuses them at first: the dead events and their replay, the writer's own held and rejected
documents with each processor's state, the thumbnails in the list, and what a read token
is shown of them."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.events.receiver import Receiver, receiving
from tests.held.conftest import PDF
from tests.support.server import Server, blobledger_command, fresh_database, running_server
from tests.support.services import Azurite
from tests.variants.images import png
from tests.web.conftest import READ_TOKEN, WRITE_TOKEN
from tests.web.support import api, row, sign_in, watch
from tests.web.test_page_sizes import no_sideways_scroll


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving(Receiver(refuse_all=True)) as found:
        yield found


@pytest.fixture(scope="module")
def web_server(azurite: Azurite, receiver: Receiver) -> Iterator[Server]:
    """This module's server (the conftest's ``proxy`` and ``base`` lead to it): the
    processing worker runs once at start and then not for an hour (``sweep --once`` runs it
    when a test says), one failed delivery kills an event."""
    with fresh_database() as url, running_server(azurite, url, extra={
            "BLOBLEDGER_API_TOKENS": f"{READ_TOKEN}:read,{WRITE_TOKEN}:write",
            "BLOBLEDGER_PROCESSORS": "content-type", "BLOBLEDGER_PROCESSING_INTERVAL": "1h",
            "BLOBLEDGER_VARIANTS": "thumb=48x48,large=800x800",
            "BLOBLEDGER_WEBHOOK_URLS": receiver.url,
            "BLOBLEDGER_WEBHOOK_SECRET": receiver.secret,
            "BLOBLEDGER_EVENT_MAX_ATTEMPTS": "1"}) as server:
        yield server


def post(server: Server, name: str, data: bytes, content_type: str, *,
         hold: bool = False) -> dict[str, object]:
    with api(server) as client:
        response = client.post("/documents", params={"name": name, "hold": str(hold).lower()},
                               content=data, headers={"Content-Type": content_type})
    assert response.status_code == 201, response.text
    return dict(response.json())


def process(server: Server, cwd: Path) -> None:
    """The held documents' processors, once (``blobledger sweep --once``)."""
    done = subprocess.run(blobledger_command("sweep", "--once"), env=server.env, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def dead_events(server: Server, prefix: str) -> list[dict[str, Any]]:
    """The dead events of the documents whose names start with ``prefix``."""
    with api(server) as client:
        response = client.get("/ops/events", params={"state": "dead", "limit": 500})
    assert response.status_code == 200, response.text
    return [e for e in response.json()["items"] if str(e["data"]["name"]).startswith(prefix)]


def wait_for_dead(server: Server, prefix: str, count: int) -> list[dict[str, Any]]:
    """The delivery worker (every second) tries each event once and the receiver refuses
    it: wait (a minute at most) until ``count`` of these documents' events are dead."""
    for _ in range(240):
        found = dead_events(server, prefix)
        if len(found) >= count:
            return found
        time.sleep(0.25)
    return dead_events(server, prefix)


def test_pipeline_view_with_replay_held_documents_and_thumbnails(
    web_server: Server, receiver: Receiver, base: str, page: Page, context: BrowserContext,
    tmp_path: Path, screenshots: Path,
) -> None:
    urls, complaints = watch(page, context)
    photo = post(web_server, "pipe/photo.png", png(200, 100), "image/png")
    post(web_server, "pipe/notes.txt", b"notes\n", "text/plain")
    fake = post(web_server, "pipe/fake.png", PDF, "image/png", hold=True)
    process(web_server, tmp_path)  # the content-type check rejects the PDF called a PNG
    waiting = post(web_server, "pipe/waiting.png", png(64, 64), "image/png", hold=True)
    assert fake["status"] == waiting["status"] == "held"

    # photo's and notes' document.ready, fake's document.rejected: all refused, all dead
    dead = wait_for_dead(web_server, "pipe/", 3)
    assert sorted(e["type"] for e in dead) == [
        "document.ready", "document.ready", "document.rejected"], dead

    sign_in(page, base, WRITE_TOKEN, "pipeline")
    expect(page.locator("#pipeline-summary")).to_contain_text("content-type")
    expect(page.locator("#pipeline-summary")).to_contain_text("thumb 48x48")
    dead_rows = page.locator("#dead-rows tr", has_text="pipe/")
    expect(dead_rows).to_have_count(3)
    photo_dead = dead_rows.filter(has=page.locator("td.name", has_text="pipe/photo.png"))
    expect(photo_dead).to_have_count(1)
    expect(photo_dead).to_contain_text("answered 500")
    expect(dead_rows.filter(has_text="document.rejected")).to_contain_text("pipe/fake.png")

    # the writer's own held and rejected documents, each processor's state
    held = page.locator("#held-rows tr", has_text="pipe/")
    expect(held).to_have_count(2)
    waiting_row = page.locator(f"#held-rows tr[data-id='{waiting['id']}']")
    expect(waiting_row).to_have_attribute("data-status", "held")
    expect(waiting_row.locator("[data-processor=content-type]")).to_have_attribute(
        "data-verdict", "pending")
    rejected_row = page.locator(f"#held-rows tr[data-id='{fake['id']}']")
    expect(rejected_row).to_have_attribute("data-status", "rejected")
    expect(rejected_row.locator("[data-processor=content-type]")).to_have_attribute(
        "data-verdict", "rejected")
    expect(rejected_row.locator("td").nth(4)).to_contain_text("pdf")
    page.screenshot(path=str(screenshots / "pipeline.png"), full_page=True)

    # replay of a dead event: the receiver takes it now, and the page says so
    receiver.refuse_all = False
    event_id = photo_dead.get_attribute("data-id")
    assert event_id
    photo_dead.locator("button", has_text="Replay").click()
    expect(page.locator("#pipeline-message")).to_have_text(
        f"Replayed {event_id}: it is sent again to every target.")
    expect(dead_rows).to_have_count(2, timeout=30_000)
    page.select_option("#event-state", "delivered")
    delivered = page.locator(f"#event-rows tr[data-id='{event_id}']")
    expect(delivered).to_have_attribute("data-state", "delivered", timeout=30_000)
    assert receiver.counts[event_id] == 1
    assert receiver.bad_signatures == 0

    # a replay of an event still pending or delivered is the service's to refuse or allow;
    # one that does not exist is a 404
    with api(web_server) as client:
        assert client.post("/ops/events/evt_nope/replay").status_code == 404
        assert api(web_server, READ_TOKEN).post(
            f"/ops/events/{event_id}/replay").status_code == 403

    # the thumbnails: a ready image shows its "thumb" variant, from a blob: URL; text none
    page.goto(f"{base}/#documents")
    page.fill("#prefix", "pipe/")
    page.click("#search-form button[type=submit]")
    expect(page.locator("#doc-rows tr")).to_have_count(2)  # held and rejected: not listed
    thumb = row(page, "pipe/photo.png").locator("img.thumb")
    expect(thumb).to_have_attribute("data-state", "shown")
    expect(thumb).to_have_attribute("data-variant", "thumb")
    assert str(thumb.get_attribute("src")).startswith("blob:")
    assert page.evaluate("(img) => [img.naturalWidth, img.naturalHeight]",
                         thumb.element_handle()) == [48, 24]
    expect(row(page, "pipe/notes.txt").locator("img")).to_have_count(0)
    page.screenshot(path=str(screenshots / "documents-thumbnails.png"), full_page=True)
    assert any(f"/documents/{photo['id']}/variants/thumb" in u for u in urls)
    assert not [u for u in urls if WRITE_TOKEN in u], "the token appeared in a URL"
    assert not complaints, complaints


def test_a_read_token_sees_no_names_no_replay_and_holds_nothing(
    web_server: Server, receiver: Receiver, base: str, page: Page, context: BrowserContext,
    screenshots: Path,
) -> None:
    _, complaints = watch(page, context)
    receiver.refuse_all = True
    post(web_server, "read/held.png", png(30, 30), "image/png", hold=True)
    post(web_server, "read/notes.txt", b"notes\n", "text/plain")
    assert wait_for_dead(web_server, "read/", 1)
    sign_in(page, base, READ_TOKEN, "pipeline")
    dead_rows = page.locator("#dead-rows tr")
    expect(dead_rows.first).to_be_visible()
    for i in range(dead_rows.count()):
        expect(dead_rows.nth(i).locator("td.name")).to_have_text("")
    expect(page.locator("#dead-rows button")).to_have_count(0)
    # the writer's held documents are its own: a read token wrote none
    expect(page.locator("#held-none")).to_be_visible()
    expect(page.locator("#held-rows tr")).to_have_count(0)
    expect(page.locator("#pipeline-summary")).to_contain_text(re.compile(r"held now\s*[1-9]"))
    page.screenshot(path=str(screenshots / "pipeline-read-token.png"), full_page=True)
    page.set_viewport_size({"width": 375, "height": 667})  # a phone's width: no sideways
    expect(page.locator("#dead-rows tr").first).to_be_visible()
    no_sideways_scroll(page)
    assert not complaints, complaints
