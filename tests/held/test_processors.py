"""The two processors that ship: the content-type check on real signatures, and the external
scanner as a real command and a real HTTP endpoint."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from blobledger.protocol.documents import Document
from blobledger.workers.processors import (
    CommandScanner,
    ContentTypeCheck,
    HttpScanner,
    ProcessorFailed,
    Reader,
    Verdict,
)
from blobledger.workers.processors.content_type import judge
from tests.held.conftest import PDF, PNG

ZIP = b"PK\x03\x04" + bytes(40)
GIF = b"GIF89a" + bytes(20)


@pytest.mark.parametrize(("declared", "data", "accepted"), [
    ("image/png", PNG, True),
    ("image/png", PDF, False),  # another format's signature
    ("image/jpeg", b"just some text", False),  # a signed format without its signature
    ("image/jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", True),  # an alias
    ("text/plain", b"plain words\n", True),
    ("text/csv; charset=utf-8", "a,b\n\u00e9,1\n".encode(), True),
    ("text/plain", PNG, False),  # binary bytes declared text
    ("application/json", b'{"a": 1}', True),
    ("application/octet-stream", GIF, True),  # claims nothing
    ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", ZIP, True),
    ("application/x-custom", b"\x01\x02 unknown binary", True),  # nothing to contradict
    ("video/mp4", PDF, False),
])
def test_content_type_judgement(declared: str, data: bytes, accepted: bool) -> None:
    verdict = judge(declared, data, complete=True)
    assert verdict.accepted is accepted, verdict.reason
    if not accepted:
        assert verdict.reason and verdict.reason.startswith("declared ")


def test_a_multibyte_character_cut_by_the_head_is_still_text() -> None:
    head = ("x" * 10 + "\u00e9").encode()[:-1]
    assert judge("text/plain", head, complete=False).accepted
    assert not judge("text/plain", head, complete=True).accepted


def document(content_type: str = "application/octet-stream", size: int = 4) -> Document:
    now = datetime.now(UTC)
    return Document("d1", "n", "held", 1, size, content_type, None, "blob", now, now)


def reader(data: bytes) -> Reader:
    def read(start: int, length: int | None) -> AsyncIterator[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            end = len(data) if length is None else start + length
            yield data[start:end]
        return chunks()
    return read


async def test_the_content_type_check_reads_the_head() -> None:
    verdict = await ContentTypeCheck().run(document("image/png", len(PDF)), reader(PDF))
    assert not verdict.accepted


PY = sys.executable


async def test_command_scanner_on_stdin_and_in_a_file() -> None:
    script = ("import sys; data = open(sys.argv[1], 'rb').read() if len(sys.argv) > 1 "
              "else sys.stdin.buffer.read(); print('found', data.decode()); "
              "sys.exit(1 if b'bad' in data else 0)")
    for argv in (f"{PY} -c \"{script}\"", f"{PY} -c \"{script}\" {{path}}"):
        scanner = CommandScanner(argv, timeout=10)
        assert await scanner.run(document(), reader(b"good")) == Verdict(True)
        assert await scanner.run(document(), reader(b"bad")) == Verdict(False, "found bad")


async def test_command_scanner_failures() -> None:
    with pytest.raises(ProcessorFailed, match="exited 2"):
        await CommandScanner("sh -c 'echo broken; exit 2'", 10).run(document(), reader(b"x"))
    with pytest.raises(ProcessorFailed, match="could not start"):
        await CommandScanner("/nonexistent/scanner", 10).run(document(), reader(b"x"))
    started = time.monotonic()
    with pytest.raises(ProcessorFailed, match="ran past"):
        await CommandScanner("sleep 5", 0.3).run(document(), reader(b"x"))
    assert time.monotonic() - started < 3


class Scanner(BaseHTTPRequestHandler):
    """Accepts, rejects (422, problem JSON), fails (500) or stalls, by the body."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"] or 0))
        assert self.headers["Blobledger-Document"] == "d1"
        if b"stall" in body:
            time.sleep(2)
        status = 422 if b"bad" in body else 500 if b"error" in body else 200
        answer = json.dumps({"detail": "Eicar-Test-Signature"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/problem+json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scanner_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scanner)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/scan"
    server.shutdown()
    server.server_close()


async def test_http_scanner(scanner_url: str) -> None:
    scanner = HttpScanner(scanner_url, timeout=0.5)
    assert await scanner.run(document(), reader(b"good")) == Verdict(True)
    assert await scanner.run(document(size=3), reader(b"bad")) == Verdict(
        False, "Eicar-Test-Signature")
    with pytest.raises(ProcessorFailed, match="answered 500"):
        await scanner.run(document(size=5), reader(b"error"))
    with pytest.raises(ProcessorFailed, match="Timeout"):
        await scanner.run(document(size=5), reader(b"stall"))
