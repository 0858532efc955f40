"""Schemathesis against ``/openapi.json`` of a real server: what the service answers is what
its document says (each status declared, each content type declared, each body and declared
header as the schema has it), and no input makes it answer 5xx."""

from __future__ import annotations

import base64
import json
from collections import Counter
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Response

from tests.support.openapi import CONFORMANCE, OFFSET_TYPE, operations
from tests.support.server import Server, live_service

__all__ = ["live_service"]
EXAMPLES = 8  # per operation: 29 operations (the lifetime below reaches the rest)
#: Schemathesis' other checks are left out, as they judge nothing here:
#: ``negative_data_rejection`` (for invalid data, which these cases are not),
#: ``positive_data_acceptance`` (valid data naming no document is rightly a 404),
#: ``ignored_auth`` (this server has no tokens: tests/api/test_openapi.py holds the 401 and
#: 403 answers to the document), the stateful ones (``use_after_free``,
#: ``ensure_resource_availability``) and those of the coverage phase
#: (``missing_required_header``, ``unsupported_method``), which these cases never trigger.


def test_the_answers_are_those_the_document_declares(live_service: Server) -> None:
    found = operations(live_service.url)
    assert len(found) >= 20
    statuses: Counter[int] = Counter()
    for operation in found:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case: schemathesis.Case[Any]) -> None:
            response = case.call(timeout=30)
            statuses[response.status_code] += 1
            case.validate_response(response, checks=CONFORMANCE)

        check()
    # the run was not vacuous: many answers, successes and refusals among them
    assert statuses.total() >= 150 and any(s < 300 for s in statuses), statuses
    assert any(400 <= s < 500 for s in statuses), statuses


def test_each_answer_of_a_lifetime_is_the_declared_one(live_service: Server) -> None:
    """The successes and refusals generated data seldom reaches (a created document, a
    range, a stale If-Match, a tus upload to its end, a direct upload), each checked."""
    schema = schemathesis.openapi.from_url(f"{live_service.url}/openapi.json")

    def call(method: str, path: str, status: int, **parts: Any) -> Response:
        case = schema[path][method].Case(**parts)
        response = case.call(timeout=30)
        case.validate_response(response, checks=CONFORMANCE)
        assert response.status_code == status, (method, path, response.content[:300])
        return response

    raw = {"media_type": "application/octet-stream"}
    created = call("POST", "/documents", 201, query={"name": "life.txt"},
                   body=b"0123456789", **raw)
    doc = json.loads(created.content)
    one = {"doc_id": doc["id"]}
    etag = header(created, "etag")
    call("POST", "/documents", 409, query={"name": "life.txt"}, body=b"x", **raw)
    call("GET", "/documents", 200, query={"prefix": "life"})
    call("GET", "/documents/{doc_id}", 200, path_parameters=one)
    call("HEAD", "/documents/{doc_id}", 200, path_parameters=one)
    call("GET", "/documents/{doc_id}", 304, path_parameters=one,
         headers={"If-None-Match": etag})
    content = "/documents/{doc_id}/content"
    assert call("GET", content, 200, path_parameters=one).content == b"0123456789"
    part = call("GET", content, 206, path_parameters=one, headers={"Range": "bytes=2-4"})
    assert part.content == b"234" and header(part, "content-range") == "bytes 2-4/10"
    call("HEAD", content, 206, path_parameters=one, headers={"Range": "bytes=2-4"})
    call("GET", content, 416, path_parameters=one, headers={"Range": "bytes=50-60"})
    call("PUT", content, 428, path_parameters=one, body=b"new", **raw)
    call("PUT", content, 200, path_parameters=one, headers={"If-Match": etag},
         body=b"new", **raw)
    call("PUT", content, 412, path_parameters=one, headers={"If-Match": etag},
         body=b"newer", **raw)
    signed = json.loads(call("POST", "/documents/{doc_id}/url", 200,
                             path_parameters=one).content)
    absolute = signed["url"] if "://" in signed["url"] else live_service.url + signed["url"]
    assert httpx.get(absolute).content == b"new"
    moved = call("GET", content, 307, path_parameters=one, query={"redirect": "true"})
    location = header(moved, "location")  # signed again: its times may be a second later
    assert location.split("?")[0] == signed["url"].split("?")[0]
    fetched = location if "://" in location else live_service.url + location
    assert httpx.get(fetched).content == b"new"
    version = "/documents/{doc_id}/versions/{version}/content"
    kept = call("GET", version, 200, path_parameters={**one, "version": 2})
    assert kept.content == b"new" and "immutable" in header(kept, "cache-control")
    call("HEAD", version, 200, path_parameters={**one, "version": 2})
    call("GET", version, 410, path_parameters={**one, "version": 1})
    call("GET", version, 404, path_parameters={**one, "version": 3})
    call("DELETE", "/documents/{doc_id}", 412, path_parameters=one,
         headers={"If-Match": etag})

    tus = {"Tus-Resumable": "1.0.0"}
    began = call("POST", "/files/", 201, headers={
        **tus, "Upload-Length": "6",
        "Upload-Metadata": "name " + base64.b64encode(b"tus.txt").decode()})
    upload = {"upload_id": header(began, "location").rsplit("/", 1)[1]}
    call("HEAD", "/files/{upload_id}", 200, path_parameters=upload, headers=tus)
    call("PATCH", "/files/{upload_id}", 409, path_parameters=upload,
         headers={**tus, "Upload-Offset": "3"}, body=b"abc", media_type=OFFSET_TYPE)
    done = call("PATCH", "/files/{upload_id}", 204, path_parameters=upload,
                headers={**tus, "Upload-Offset": "0"}, body=b"abcdef", media_type=OFFSET_TYPE)
    assert header(done, "blobledger-document")
    call("DELETE", "/files/{upload_id}", 204, path_parameters=upload, headers=tus)
    call("HEAD", "/files/{upload_id}", 412, path_parameters=upload)

    direct = json.loads(call("POST", "/uploads", 201, body={"name": "direct.txt", "size": 3},
                             media_type="application/json").content)
    stored = httpx.request(direct["method"], direct["url"], headers=direct["headers"],
                           content=b"xyz")
    assert stored.status_code < 300, stored.text
    mine = {"upload_id": direct["id"]}
    call("POST", "/uploads/{upload_id}/complete", 201, path_parameters=mine)
    call("DELETE", "/uploads/{upload_id}", 409, path_parameters=mine)
    call("DELETE", "/documents/{doc_id}", 204, path_parameters=one)
    call("GET", "/documents/{doc_id}", 404, path_parameters=one)

    for path in ("/ops/whoami", "/ops/overview", "/ops/metrics", "/healthz", "/readyz",
                 "/metrics"):
        call("GET", path, 200)
    for path in ("/ops/check", "/ops/reconcile"):
        call("POST", path, 200)


def header(response: Response, name: str) -> str:
    values = {key.lower(): value for key, value in response.headers.items()}[name]
    return values[0]
