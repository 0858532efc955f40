"""``blobledger serve`` delivers events to its webhooks, and none is lost when it is
SIGKILLed mid-delivery: the next ``serve`` delivers what the dead one left (its claim
lapsed), and the receiver (verifying every signature) has every event, any duplicate under
the same ``webhook-id``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.events.conftest import all_events
from tests.events.receiver import Receiver, receiving
from tests.events.test_crash import ledger_on
from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import free_port, terminate


@contextlib.contextmanager
def serve(folder: Path, url: str, receiver: Receiver, ready: bool = True,
          **extra: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    env.update(BLOBLEDGER_DATABASE_URL=url, BLOBLEDGER_STORE_URL=f"file://{folder}/store",
               BLOBLEDGER_WEBHOOK_URLS=receiver.url, BLOBLEDGER_WEBHOOK_SECRET=receiver.secret,
               BLOBLEDGER_EVENT_INTERVAL="0.2", BLOBLEDGER_EVENT_LEASE="10s",
               BLOBLEDGER_EVENT_TIMEOUT="5s", **extra)
    log = folder / f"serve-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(blobledger_command("serve", "--port", str(port)), env=env,
                                   cwd=folder, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        if ready:
            wait_until_ready(f"http://127.0.0.1:{port}", process, log)
        yield process, f"http://127.0.0.1:{port}"
    finally:
        terminate(process, 10)


async def test_a_killed_serve_loses_no_event(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with receiving() as receiver:
        async with ledger_on(url, tmp_path / "store", receiver) as ledger:
            first = await ledger.create("one.txt", b"1")
            await ledger.create("two.txt", b"2")
        # not waited on: its worker may deliver (and die) before /readyz first answers
        with serve(tmp_path, url, receiver, ready=False,
                   BLOBLEDGER_FAILPOINTS="events.after_send=kill@1") as (process, _):
            assert process.wait(30) == -signal.SIGKILL  # mid-delivery
        # the next serve: its clock past the dead one's lease; it also takes a new document
        with serve(tmp_path, url, receiver, BLOBLEDGER_CLOCK_OFFSET="11") as (_, base):
            async with httpx.AsyncClient() as client:
                created = await client.post(f"{base}/documents", params={"name": "three.txt"},
                                            content=b"3", headers={"content-type": "text/plain"})
            assert created.status_code == 201, created.text
            async with ledger_on(url, tmp_path / "store", receiver) as again:
                deadline = time.monotonic() + 30
                found = await all_events(again)
                while {e.state for e in found} != {"delivered"} or len(found) < 3:
                    assert time.monotonic() < deadline, found
                    await asyncio.sleep(0.1)
                    found = await all_events(again)
    assert [e.type for e in found] == ["document.ready"] * 3
    assert [e.state for e in found] == ["delivered"] * 3
    assert set(receiver.counts) == {e.event_id for e in found}
    assert receiver.bad_signatures == 0
    assert receiver.order(first.id) == ["document.ready"]
