"""The OpenAPI document tells the truth in process: no 422 the service never answers, a
problem document on every error, 401/403 where a token is needed (and those answers are the
declared ones), raw bodies described; and ``/docs`` loads only this service's files."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema_rs
import pytest

from blobledger.api import create_app
from blobledger.api.openapi import PROBLEM_SCHEMA
from blobledger.config import Settings

READ, WRITE = "a-read-token", "a-write-token"
PROBLEM = "application/problem+json"
BINARY = {"schema": {"type": "string", "format": "binary"}}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return create_app(settings=Settings()).openapi()


@pytest.fixture
async def guarded() -> AsyncIterator[httpx.AsyncClient]:
    """An app with tokens and no ledger: what it answers before any route reads one."""
    app = create_app(settings=Settings(api_tokens={READ: frozenset({"read"}),
                                                   WRITE: frozenset({"write"})}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://localhost") as client:
        yield client


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, operation)
            for path, item in document["paths"].items() for method, operation in item.items()]


def test_every_error_is_a_declared_problem_document(document: dict[str, Any]) -> None:
    assert document["components"]["schemas"]["Problem"] == PROBLEM_SCHEMA
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for method, path, operation in operations(document):
        answers = operation["responses"]
        assert {"400", "431"} <= set(answers), (method, path)
        if "422" in answers:  # a reused Idempotency-Key or a refused image, never a
            assert (method, path) in {  # validation error
                ("POST", "/documents"), ("POST", "/buckets/{bucket}/documents"),
                ("GET", "/documents/{doc_id}/variants/{name}"),
                ("GET", "/documents/{doc_id}/versions/{version}/variants/{name}"),
                ("HEAD", "/documents/{doc_id}/variants/{name}"),  # a HEAD makes it too
                ("HEAD", "/documents/{doc_id}/versions/{version}/variants/{name}")}
            assert "Idempotency-Key" in answers["422"]["description"]
            assert "variant" in answers["422"]["description"]
        for status, answer in answers.items():
            if int(status) >= 400:
                assert answer["content"] == {PROBLEM: {"schema": {
                    "$ref": "#/components/schemas/Problem"}}}, (method, path, status)
                assert answer["description"], (method, path, status)
        if operation.get("security"):
            assert {"401", "403"} <= set(answers), (method, path)
            assert "WWW-Authenticate" in answers["401"]["headers"]
        if method not in ("GET", "HEAD"):
            assert "403" in answers, (method, path)


def test_raw_bodies_are_described(document: dict[str, Any]) -> None:
    paths = document["paths"]
    download = paths["/documents/{doc_id}/content"]["get"]["responses"]
    assert download["200"]["content"] == {"*/*": BINARY}
    assert download["206"]["content"] == {"*/*": BINARY}
    assert {"Content-Range", "ETag"} <= set(download["206"]["headers"])
    for route, method in (("/documents/{doc_id}/content", "put"), ("/documents", "post"),
                          ("/uploads/{upload_id}/content", "put")):
        body = paths[route][method]["requestBody"]
        assert body["content"]["application/octet-stream"] == BINARY, route
    patch = paths["/files/{upload_id}"]["patch"]
    assert patch["requestBody"]["content"] == {"application/offset+octet-stream": BINARY}
    assert patch["requestBody"]["required"] is True
    assert {p["name"] for p in patch["parameters"] if p["required"]} >= {
        "Tus-Resumable", "Upload-Offset"}
    created = paths["/files/"]["post"]
    assert created["requestBody"]["required"] is False
    assert created["responses"]["201"]["content"] == {}  # no body: headers only
    assert "Location" in created["responses"]["201"]["headers"]


def declared(document: dict[str, Any], method: str, path: str, status: int) -> None:
    answers = document["paths"][path][method.lower()]["responses"]
    assert str(status) in answers, (method, path, status, sorted(answers))


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x", path)


async def test_refusals_of_tokens_are_the_declared_ones(
        document: dict[str, Any], guarded: httpx.AsyncClient) -> None:
    validator = jsonschema_rs.validator_for(PROBLEM_SCHEMA)
    seen = 0
    for method, path, operation in operations(document):
        if not operation.get("security"):
            continue
        [[scope]] = [scopes for requirement in operation["security"]
                     for scopes in requirement.values()]
        lacking = {"write": READ, "read": WRITE, "admin": WRITE}[scope]
        for headers, status in (({}, 401), ({"Authorization": "Bearer not-ours"}, 401),
                                ({"Authorization": f"Bearer {lacking}"}, 403)):
            response = await guarded.request(method, concrete(path), headers=headers)
            assert response.status_code == status, (method, path, headers, response.text)
            declared(document, method, path, status)
            assert response.headers["content-type"] == PROBLEM
            if method != "HEAD":
                validator.validate(response.json())
            if status == 401:
                assert response.headers["www-authenticate"].startswith("Bearer")
            seen += 1
    assert seen >= 3 * 20


async def test_bad_parameters_are_a_declared_400_not_a_422(
        document: dict[str, Any], guarded: httpx.AsyncClient) -> None:
    auth = {"Authorization": f"Bearer {READ}"}
    for path, params in (("/documents", {"limit": "0"}), ("/documents", {"limit": "x"}),
                         ("/ops/overview", {"limit": "100000"})):
        response = await guarded.get(path, params=params, headers=auth)
        assert response.status_code == 400, response.text
        declared(document, "GET", path, 400)
        body = response.json()
        jsonschema_rs.validate(PROBLEM_SCHEMA, body)
        assert body["errors"] and body["type"] == "urn:blobledger:problem:invalid-input"


async def test_the_docs_page_loads_only_files_of_this_service(
        guarded: httpx.AsyncClient) -> None:
    page = await guarded.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    scripts = re.findall(r"<script([^>]*)>", page.text)
    assert scripts and all("src=" in attributes for attributes in scripts)  # none inline
    loaded = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert loaded and not [url for url in loaded if "//" in url or url.startswith("/")]
    kinds = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}
    for url in loaded:
        response = await guarded.get(f"/{url}")
        assert response.status_code == 200, url
        assert response.headers["content-type"].startswith(kinds[url[url.rindex("."):]])
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "openapi.json" in page.text
    for missing in ("index.html", "..%2Fdocs.py", "redoc.standalone.js"):
        response = await guarded.get(f"/docs/static/{missing}")
        assert response.status_code == 404, missing
        assert response.headers["content-type"] == PROBLEM
    for gone in ("/redoc", "/docs/oauth2-redirect"):
        assert (await guarded.get(gone)).status_code == 404
