"""A store that is down answers within seconds: 503 problem+json with Retry-After.

Real peers, stopped for real: a per-test Azurite or moto is SIGKILLed under a running
``blobledger serve`` (default settings), then readiness, an upload, a download and
``blobledger check`` are asked. Each must answer within :data:`BOUND` seconds
(:data:`COMMAND_BOUND` for the command) (the client's
timeout: a behaviour of the store's timeout, retry and breaker settings, not a speed claim:
the SDKs' own retries used to stack to 18-33 s here).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import Server, blobledger_command, running_server
from tests.support.services import start_azurite, start_moto

#: seconds an answer may take once the store is down (a client timeout, not a measurement)
BOUND = 8.0
#: the same for a command, which first starts a Python process (seconds on a busy machine)
COMMAND_BOUND = 15.0


@pytest.fixture(params=["azure", "s3"])
def stoppable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, object]]:
    """A server on its own store process (returned, to be killed) and a SQLite database."""
    azurite = start_azurite()
    moto = start_moto() if request.param == "s3" else None
    extra = {"BLOBLEDGER_STORE_URL": "s3://downbucket", **moto.environment()} if moto else {}
    try:
        with running_server(azurite, f"sqlite:///{tmp_path / 'ledger.db'}",
                            extra=extra) as server:
            yield server, (moto or azurite).process
    finally:
        azurite.stop()
        if moto:
            moto.stop()


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["status"] == 503
    assert response.headers["retry-after"].isdigit()


def test_a_stopped_store_answers_503_within_seconds(
        stoppable: tuple[Server, subprocess.Popen[bytes]]) -> None:
    server, store = stoppable
    created = httpx.post(f"{server.url}/documents", params={"name": "kept.txt"},
                         content=b"kept bytes", timeout=30)
    assert created.status_code == 201, created.text
    document = created.json()["id"]
    store.kill()
    store.wait()
    with httpx.Client(base_url=server.url, timeout=BOUND) as client:
        for _ in range(2):  # before the breaker opens, and after
            assert_unavailable(client.get("/readyz"))
            assert_unavailable(client.post("/documents", params={"name": "new.txt"},
                                           content=b"new bytes"))
            assert_unavailable(client.get(f"/documents/{document}/content"))
    checked = subprocess.run(blobledger_command("check"), env=server.env, capture_output=True,
                             text=True, timeout=COMMAND_BOUND, cwd=server.log.parent)
    assert checked.returncode == 3, checked.stderr
    assert checked.stderr.startswith("blobledger: error: ")
