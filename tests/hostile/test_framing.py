"""Request smuggling: a request whose body two parsers could frame differently is refused
with a 400 and its connection closed, and nothing hidden in its body is ever read as a
request. Over raw sockets against a real ``blobledger serve`` (no tokens, as by default)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.hostile.support import Served, connect, is_closed, read_response, serve

#: a request that, if it were ever answered, would create a document
HIDDEN = (b"POST /documents?name=smuggled.txt HTTP/1.1\r\nHost: localhost\r\n"
          b"Content-Length: 0\r\n\r\n")


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with serve() as served:
        yield served


def names(server: Served) -> set[str]:
    return {item["name"] for item in httpx.get(f"{server.url}/documents").json()["items"]}


def head(*fields: bytes, method: bytes = b"POST", version: bytes = b"1.1") -> bytes:
    return (method + b" /documents?name=outer.txt HTTP/" + version + b"\r\nHost: localhost\r\n"
            + b"".join(field + b"\r\n" for field in fields) + b"\r\n")


AMBIGUOUS = {
    "length and chunked": head(b"Content-Length: 5", b"Transfer-Encoding: chunked")
    + b"0\r\n\r\n" + HIDDEN,
    "chunked and length": head(b"Transfer-Encoding: chunked", b"Content-Length: 87")
    + b"0\r\n\r\n" + HIDDEN,
    "length and chunked on a GET": head(b"Content-Length: 5", b"Transfer-Encoding: chunked",
                                        method=b"GET") + b"0\r\n\r\n" + HIDDEN,
    "length twice": head(b"Content-Length: 2", b"Content-Length: 2") + b"ab" + HIDDEN,
    "length as a list": head(b"Content-Length: 2, 2") + b"ab" + HIDDEN,
    "Chunked": head(b"Transfer-Encoding: Chunked") + b"0\r\n\r\n" + HIDDEN,
    "chunked in HTTP/1.0": head(b"Transfer-Encoding: chunked", version=b"1.0")
    + b"0\r\n\r\n" + HIDDEN,
}


@pytest.mark.parametrize("request_bytes", AMBIGUOUS.values(), ids=AMBIGUOUS.keys())
def test_ambiguous_framing_is_refused_and_the_connection_closed(
        server: Served, request_bytes: bytes) -> None:
    sock = connect(server.port)
    try:
        sock.sendall(request_bytes)
        response = read_response(sock)
        assert response.status == 400
        assert response.problem()["type"] == "urn:blobledger:problem:malformed-request"
        assert is_closed(sock, 5)  # and no second answer came before the end
    finally:
        sock.close()
    assert not {"outer.txt", "smuggled.txt"} & names(server)


def test_plain_chunked_and_length_framing_still_work(server: Served) -> None:
    """A keep-alive connection carrying a chunked request, then a Content-Length one."""
    sock = connect(server.port)
    buffer = bytearray()
    try:
        sock.sendall(head(b"Transfer-Encoding: chunked").replace(b"outer", b"chunked")
                     + b"3\r\nabc\r\n0\r\n\r\n")
        assert read_response(sock, buffer).status == 201
        sock.sendall(head(b"Content-Length: 3").replace(b"outer", b"length") + b"abc")
        assert read_response(sock, buffer).status == 201
    finally:
        sock.close()
    assert {"chunked.txt", "length.txt"} <= names(server)
