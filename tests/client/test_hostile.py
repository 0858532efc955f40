"""The client against a scripted server that lies: every answer is checked before it is
used, and a lie is one error (BadAnswer, Refused, IntegrityError, ServiceError), never a
traceback of the parser, a wrong document, spliced bytes or a token sent elsewhere."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest

from blobledger.client import BadAnswer, Client, DocumentInfo, Refused
from blobledger.errors import (
    IdempotencyConflict,
    IntegrityError,
    NotFound,
    PreconditionFailed,
    ServiceError,
)
from tests.hostile.scripted import (
    Hostile,
    Reply,
    Request,
    json_reply,
    problem_reply,
    running,
)

ID = "a" * 32
DOC = {"id": ID, "name": "a.txt", "version": 1, "size": 3, "sha256": None}


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    yield from running()


def client(hostile: Hostile) -> Client:
    return Client(hostile.url, token="secret", retries=2)


def test_a_document_of_another_id_is_refused(hostile: Hostile) -> None:
    hostile.respond = lambda request: json_reply(200, {**DOC, "id": "b" * 32})
    with client(hostile) as c, pytest.raises(BadAnswer, match="the document 'bbbb"):
        c.get(ID)


def test_a_body_that_is_not_a_document_is_refused(hostile: Hostile) -> None:
    hostile.respond = lambda request: json_reply(201, {**DOC, "version": "1"})
    with client(hostile) as c, pytest.raises(BadAnswer, match="not a document"):
        c.create("a.txt", b"abc")


def test_problems_become_blobledger_errors(hostile: Hostile) -> None:
    answers = {
        "/documents/" + "1" * 32: problem_reply(404, {
            "type": "urn:blobledger:problem:not-found", "status": 404, "detail": "no such"}),
        "/documents/" + "2" * 32: problem_reply(412, {
            "type": "urn:blobledger:problem:precondition-failed", "status": 412,
            "detail": "stale", "current_version": 4}),
        "/documents/" + "3" * 32: problem_reply(418, b"<html>teapot</html>", "text/html"),
        "/documents/" + "4" * 32: problem_reply(422, {
            "type": "urn:blobledger:problem:idempotency-conflict", "status": 422,
            "detail": "other bytes"}),
    }
    hostile.respond = lambda request: answers[request.path]
    with client(hostile) as c:
        with pytest.raises(NotFound, match=r"^no such \(HTTP 404\)$"):
            c.get("1" * 32)
        with pytest.raises(PreconditionFailed) as stale:
            c.get("2" * 32)
        assert stale.value.current_version == 4
        with pytest.raises(ServiceError, match="not a problem document") as teapot:
            c.get("3" * 32)
        assert teapot.value.status == 418
        with pytest.raises(IdempotencyConflict):
            c.get("4" * 32)
    assert len(hostile.requests) == 4  # none of them retried


def test_409_with_retry_after_is_retried_but_not_without(hostile: Hostile) -> None:
    busy = problem_reply(409, {"type": "urn:blobledger:problem:idempotency-in-progress",
                               "status": 409, "detail": "still running"})
    answers = iter([Reply(busy.status, busy.body, {**busy.headers, "Retry-After": "0"}),
                    json_reply(201, DOC)])
    hostile.respond = lambda request: next(answers)
    with client(hostile) as c:
        assert c.create("a.txt", b"abc").id == ID
    keys = {r.headers["idempotency-key"] for r in hostile.requests}
    assert len(hostile.requests) == 2 and len(keys) == 1
    assert hostile.requests[0].headers["authorization"] == "Bearer secret"


def test_a_listing_that_would_never_end_is_stopped(hostile: Hostile) -> None:
    hostile.respond = lambda request: json_reply(200, {"items": [DOC], "next_cursor": "same"})
    got: list[DocumentInfo] = []  # what came before the refusal is kept
    with client(hostile) as c, pytest.raises(BadAnswer, match=r"page 2 .* never end"):
        got.extend(c.documents())
    assert len(hostile.requests) == 2 and len(got) == 2


def digest(data: bytes) -> str:
    return f"sha-256=:{base64.b64encode(hashlib.sha256(data).digest()).decode()}:"


def test_bytes_that_do_not_match_their_sha256_are_refused(hostile: Hostile) -> None:
    hostile.respond = lambda request: Reply(200, b"forged", {
        "ETag": '"1"', "Repr-Digest": digest(b"honest")})
    with client(hostile) as c, pytest.raises(IntegrityError):
        c.read(ID)


def test_a_range_that_is_not_the_one_asked_for_is_refused(hostile: Hostile) -> None:
    hostile.respond = lambda request: Reply(206, b"abc", {
        "ETag": '"1"', "Content-Range": "bytes 0-2/10"})
    with client(hostile) as c, pytest.raises(BadAnswer, match="not from 5"):
        c.read(ID, start=5)


def test_a_direct_target_asking_for_the_token_is_refused_and_nothing_sent(
        hostile: Hostile) -> None:
    hostile.respond = lambda request: json_reply(201, {
        "id": "up1", "method": "PUT", "url": f"{hostile.url}/steal",
        "headers": {"Authorization": "Bearer x"}, "size": 3})
    with client(hostile) as c, pytest.raises(Refused, match="Authorization"):
        c.upload_direct("a.txt", b"abc")
    assert hostile.seen() == [("POST", "/uploads")]


def test_a_tus_location_on_another_origin_is_refused(hostile: Hostile) -> None:
    def respond(request: Request) -> Reply:
        return Reply(201, b"", {"Location": "http://elsewhere.example/files/x",
                                "Tus-Resumable": "1.0.0"})

    hostile.respond = respond
    with client(hostile) as c, pytest.raises(BadAnswer, match="another origin"):
        c.upload_tus("a.txt", b"abc")
    assert hostile.seen() == [("POST", "/files/")]
