"""The scan processor against a hostile scanner: a command whose children outlive its
timeout, an endpoint answering a compressed rejection that decodes to 256 MiB, the
environment's proxy variables, and credentials in the endpoint's URL. Real processes and a
real HTTP server on a loopback socket."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from blobledger.workers.processors import CommandScanner, HttpScanner, ProcessorFailed
from tests.held.test_processors import document, reader
from tests.hostile.receivers import gzip_of_zeros
from tests.hostile.scripted import Hostile, Reply, json_reply, running
from tests.support.services import free_port


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    yield from running()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie is dead, only not yet reaped by its new parent


@pytest.mark.parametrize("output", ["", " > /dev/null 2>&1"],
                         ids=["child-holds-the-output", "child-detached"])
async def test_a_timed_out_scanner_leaves_no_child_running(tmp_path: Path, output: str) -> None:
    pidfile = tmp_path / "child"
    scanner = CommandScanner(f"sh -c 'sleep 300{output} & echo $! > {pidfile}; wait'", 1.0)
    # ten times the scanner's timeout: a child holding the output would hold the scan for
    # its 300 s; a detached one would keep running
    async with asyncio.timeout(10):
        with pytest.raises(ProcessorFailed, match="ran past"):
            await scanner.run(document(size=1), reader(b"x"))
    child = int(pidfile.read_text())
    bound = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < bound, f"the scanner's child {child} is still running"
        await asyncio.sleep(0.05)


async def test_a_compressed_rejection_is_read_only_so_far(hostile: Hostile) -> None:
    bomb = gzip_of_zeros(256 * 1024 * 1024)
    hostile.respond = lambda request: Reply(422, bomb, {"Content-Type": "text/plain",
                                                       "Content-Encoding": "gzip"})
    tracemalloc.start()
    try:
        verdict = await HttpScanner(hostile.url + "/scan", 10).run(document(size=1), reader(b"x"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not verdict.accepted
    # read whole, the answer costs three times the bomb decoded (about 800 MiB); read so
    # far, one network read decoded (up to 64 MiB) and the 64 KiB kept: about 150 MiB
    assert peak < 256 * 1024 * 1024, peak


async def test_the_scanner_is_called_past_the_environments_proxy(
        hostile: Hostile, monkeypatch: pytest.MonkeyPatch) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, nowhere)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    hostile.respond = lambda request: json_reply(200, {})
    verdict = await HttpScanner(hostile.url + "/scan", 10).run(document(size=1), reader(b"x"))
    assert verdict.accepted
    assert hostile.seen() == [("POST", "/scan")]


async def test_a_failing_scanners_url_is_named_without_its_credentials() -> None:
    url = f"http://scan:s3cret-pass@127.0.0.1:{free_port()}/scan?token=s3cret-token"
    with pytest.raises(ProcessorFailed) as failed:
        await HttpScanner(url, 5).run(document(size=1), reader(b"x"))
    assert "127.0.0.1" in str(failed.value)
    assert "s3cret" not in str(failed.value)
