"""The client through a fault proxy in front of a real server: a download cut halfway is
resumed from where it broke, and only if the document is still the same; what says retry
is retried, and nothing else is."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from blobledger.client import AsyncClient, Client
from blobledger.errors import NameTaken, PreconditionFailed
from tests.support.faultproxy import FaultProxy, Request
from tests.support.server import Server


def through(proxy: FaultProxy) -> str:
    return f"http://127.0.0.1:{proxy.port}"


def record(proxy: FaultProxy) -> list[Request]:
    """Every request the proxy sees from now on (a rule that never applies, put before
    every other one)."""
    seen: list[Request] = []

    def keep(request: Request) -> bool:
        seen.append(request)
        return False

    proxy.add(keep, "never", times=10**9)
    proxy.rules.insert(0, proxy.rules.pop())
    return seen


def content_get(request: Request) -> bool:
    return request.method == "GET" and request.path.endswith("/content")


def test_a_cut_download_resumes_from_the_offset_reached(server: Server,
                                                        proxy: FaultProxy) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    with Client(through(proxy), retries=3) as client:
        doc = client.create(f"faults/{uuid.uuid4().hex}.bin", data)
        proxy.add(content_get, "reset_response", times=2)
        seen = record(proxy)
        assert client.read(doc.id) == data
    assert proxy.injected["reset_response"] == 2
    ranges = [r.header("range") for r in seen if content_get(r)]
    assert len(ranges) == 3 and ranges[0] is None
    assert all(r is not None and r.startswith("bytes=") and not r.startswith("bytes=0-")
               for r in ranges[1:])
    assert [r.header("if-range") for r in seen if content_get(r)][1:] == ['"1"', '"1"']


async def test_a_document_changed_between_the_cut_and_the_resume_is_not_spliced(
        server: Server, proxy: FaultProxy) -> None:
    data = os.urandom(2 * 1024 * 1024)
    async with AsyncClient(through(proxy), retries=3) as client:
        doc = await client.create(f"faults/{uuid.uuid4().hex}.bin", data)
        proxy.add(content_get, "reset_response")

        def replace_first(request: Request) -> bool:  # before the resumed GET goes on
            if content_get(request) and request.header("range"):
                replaced = httpx.put(f"{server.url}/documents/{doc.id}/content",
                                     content=b"new bytes", headers={"If-Match": '"1"'})
                assert replaced.status_code == 200, replaced.text
            return False

        proxy.add(replace_first, "never", times=10**9)
        with pytest.raises(PreconditionFailed, match="changed while it was read"):
            await client.read(doc.id)
        assert await client.read(doc.id) == b"new bytes"


def test_503_with_retry_after_is_retried_under_the_same_key(server: Server,
                                                            proxy: FaultProxy) -> None:
    name = f"faults/{uuid.uuid4().hex}.bin"
    seen = record(proxy)
    proxy.add(lambda r: r.method == "POST", "status:503:1", times=2)
    with Client(through(proxy), retries=3) as client:
        doc = client.create(name, b"retried")
    posts = [r for r in seen if r.method == "POST"]
    assert proxy.injected["status"] == 2 and len(posts) == 3
    assert len({r.header("idempotency-key") for r in posts}) == 1
    assert httpx.get(f"{server.url}/documents/{doc.id}/content").content == b"retried"


def test_409_and_412_are_never_retried(server: Server, proxy: FaultProxy) -> None:
    seen = record(proxy)
    with Client(through(proxy), retries=5) as client:
        doc = client.create(f"faults/{uuid.uuid4().hex}.bin", b"one")
        before = len(seen)
        with pytest.raises(NameTaken):
            client.create(doc.name, b"two")
        with pytest.raises(PreconditionFailed):
            client.replace(doc.id, b"two", if_match=7)
        with pytest.raises(PreconditionFailed):
            client.delete(doc.id, if_match=7)
    assert [r.method for r in seen[before:]] == ["POST", "PUT", "DELETE"]


def test_a_connection_refused_is_retried_then_raised() -> None:
    from tests.support.services import free_port

    with Client(f"http://127.0.0.1:{free_port()}", retries=1) as client, \
            pytest.raises(httpx.ConnectError):
        client.get("0" * 32)


def test_a_tus_upload_resumes_after_a_broken_part(server: Server, proxy: FaultProxy) -> None:
    data = os.urandom(600_000)
    seen = record(proxy)
    proxy.add(lambda r: r.method == "PATCH", "reset_request")
    with Client(through(proxy), retries=3) as client:
        doc = client.upload_tus(f"faults/{uuid.uuid4().hex}.bin", data, chunk_size=200_000)
        assert client.read(doc.id) == data
    assert proxy.injected["reset_request"] == 1
    assert [r.method for r in seen].count("HEAD") >= 2  # the offset asked for again


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """The command line, in process, with no setting from the environment: its exit code,
    stdout and stderr."""
    from blobledger.cli import main

    for name in [k for k in os.environ if k.startswith("BLOBLEDGER_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_the_cli_get_resumes_a_cut_download_as_the_client_does(
        server: Server, proxy: FaultProxy, tmp_path: Path,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    data = os.urandom(3 * 1024 * 1024 + 5)
    with Client(server.url) as client:
        doc = client.create(f"faults/{uuid.uuid4().hex}.bin", data)
    proxy.add(content_get, "reset_response")
    seen = record(proxy)
    target = tmp_path / "copy.bin"
    code, _, err = cli("get", doc.id, "-o", str(target), "--url", through(proxy))
    assert code == 0, err
    assert target.read_bytes() == data and proxy.injected["reset_response"] == 1
    resumed = [r for r in seen if content_get(r)][1]
    assert resumed.header("if-range") == '"1"'
    assert (resumed.header("range") or "").startswith("bytes=")
    assert not (resumed.header("range") or "").startswith("bytes=0-")


def test_the_cli_put_retries_under_one_key_with_the_files_digest(
        server: Server, proxy: FaultProxy, tmp_path: Path,
        cli: Callable[..., tuple[int, str, str]]) -> None:
    source = tmp_path / "retried.txt"
    source.write_bytes(b"the bytes of a retried put")
    seen = record(proxy)
    proxy.add(lambda r: r.method == "POST", "status:503:0", times=2)
    name = f"faults/{uuid.uuid4().hex}.txt"
    code, out, err = cli("put", str(source), "--name", name, "--url", through(proxy))
    assert code == 0, err
    posts = [r for r in seen if r.method == "POST"]
    assert proxy.injected["status"] == 2 and len(posts) == 3
    assert len({r.header("idempotency-key") for r in posts}) == 1
    digest = base64.b64encode(hashlib.sha256(source.read_bytes()).digest()).decode()
    assert {r.header("repr-digest") for r in posts} == {f"sha-256=:{digest}:"}
    doc = json.loads(out)
    assert httpx.get(f"{server.url}/documents/{doc['id']}/content").content == \
        source.read_bytes()


def test_on_retry_is_told_each_retry_and_the_give_up_within_connect_retries() -> None:
    from blobledger.client import Retried
    from tests.support.services import free_port

    seen: list[Retried] = []
    with Client(f"http://127.0.0.1:{free_port()}", retries=5, connect_retries=1,
                on_retry=seen.append) as client, pytest.raises(httpx.ConnectError):
        client.get("0" * 32)
    assert [(r.retry, r.of, r.wait is None) for r in seen] == [(1, 1, False), (2, 1, True)]
    assert all(isinstance(r.cause, httpx.ConnectError) for r in seen)
    assert seen[0].wait is not None and 0 < seen[0].wait < 1
