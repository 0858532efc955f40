"""Form parts with oversized or numerous headers, and the dependency floors that bound them."""

from __future__ import annotations

import re
from importlib import metadata

import httpx
import pytest

from blobledger.api.multipart import MAX_PART_HEADER_BYTES, MAX_PART_HEADERS
from tests.api.conftest import problem

B = "bound"


def form_with_file_headers(*headers: bytes) -> tuple[dict[str, str], bytes]:
    body = (f"--{B}\r\n".encode() + b'Content-Disposition: form-data; name="name"\r\n\r\n'
            + b"n.txt\r\n" + f"--{B}\r\n".encode()
            + b'Content-Disposition: form-data; name="file"; filename="f"\r\n'
            + b"".join(h + b"\r\n" for h in headers) + b"\r\nbytes\r\n"
            + f"--{B}--\r\n".encode())
    return {"Content-Type": f"multipart/form-data; boundary={B}"}, body


@pytest.mark.parametrize("headers", [
    [b"X-Huge: " + b"a" * (1024 * 1024)],  # one 1 MiB header line
    [b"X-Part-%d: " % i + b"a" * 3000 for i in range(3)],  # each small, together too much
    [b"X-Many-%d: a" % i for i in range(MAX_PART_HEADERS + 1)],
])
async def test_part_headers_are_bounded(hostile: httpx.AsyncClient,
                                        headers: list[bytes]) -> None:
    request_headers, body = form_with_file_headers(*headers)
    response = await hostile.post("/documents", headers=request_headers, content=body)
    problem(response, 400, "invalid-multipart")
    assert (await hostile.get("/documents")).json()["items"] == []


async def test_headers_within_the_bounds_are_accepted(hostile: httpx.AsyncClient) -> None:
    headers = [b"Content-Type: text/plain", b"X-Note: " + b"a" * (MAX_PART_HEADER_BYTES // 2)]
    request_headers, body = form_with_file_headers(*headers)
    response = await hostile.post("/documents", headers=request_headers, content=body)
    assert response.status_code == 201, response.text


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@pytest.mark.parametrize(("package", "floor"), [
    ("python-multipart", "0.0.31"), ("h11", "0.16"), ("starlette", "0.49.1"),
])
def test_dependency_floors_are_declared_and_installed(package: str, floor: str) -> None:
    requires = metadata.requires("blobledger") or []
    declared = [r for r in requires if re.match(rf"{re.escape(package)}\s*>=", r)]
    assert declared and _version(declared[0].split(">=", 1)[1]) >= _version(floor), declared
    assert _version(metadata.version(package)) >= _version(floor)
