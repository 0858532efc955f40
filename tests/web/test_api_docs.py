"""``/docs`` in headless Chromium against a real ``blobledger serve`` with every request to
anything but the service aborted (as on a machine with no network): Swagger UI renders the
operations from the package's files, under the page's Content Security Policy (no violation
reported), and runs a request. The screenshots are saved (see ``conftest.py``)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import ConsoleMessage, Page, Route, expect

from tests.support.server import Server


def test_the_api_docs_work_with_no_network_but_the_service(
        page: Page, web_server: Server, screenshots: Path) -> None:
    own = web_server.url
    elsewhere: list[str] = []
    problems: list[str] = []

    def only_the_service(route: Route) -> None:
        if route.request.url.startswith(f"{own}/"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(message.text)

    page.route("**/*", only_the_service)
    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{own}/docs")

    expect(page.locator(".swagger-ui .info .title")).to_contain_text("blobledger")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() >= 20
    expect(page.locator(".opblock-summary-path", has_text="/documents/{doc_id}/content")
           .first).to_be_visible()

    page.screenshot(path=str(screenshots / "api-docs.png"))

    health = page.locator(".opblock", has=page.locator(
        ".opblock-summary-path", has_text="/healthz"))
    health.locator(".opblock-summary").click()
    health.get_by_role("button", name="Try it out").click()
    health.get_by_role("button", name="Execute").click()
    expect(health.locator(".live-responses-table tbody .response-col_status").first
           ).to_have_text("200")
    page.screenshot(path=str(screenshots / "api-docs-tried.png"))

    assert elsewhere == [], elsewhere
    assert problems == [], problems
