"""The S3 endpoint's writers in the crash and pause matrices: a real ``blobledger serve`` on a
crash target's database and store (:mod:`tests.crash.serve_child`), and boto3's client
making the request a user would make (PutObject, DeleteObject), from a thread, while the
server dies or sleeps at the armed failpoint."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.crash.child import SETTINGS, Target
from tests.crash.harness import CHILD_TIMEOUT
from tests.crash.pause import process_state
from tests.support.forkserver import forkserver_context
from tests.support.services import free_port

_CONTEXT = forkserver_context("tests.crash.serve_child", "tests.crash.s3serve")
BUCKET = "blobledger"
KEY_ID, SECRET = "AKIDCRASH", "crash-secret-0123456789"


def serve_env(target: Target, failpoints: str = "", clock_offset: float = 0.0
              ) -> dict[str, str]:
    """``serve``'s environment on the target: its database and store, the crash matrix's
    deadlines, no background sweeper (the test runs it), one access key that writes."""
    env = {
        "BLOBLEDGER_DATABASE_URL": target.database_url,
        "BLOBLEDGER_UPLOAD_DEADLINE": f"{SETTINGS['upload_deadline']:g}s",
        "BLOBLEDGER_SWEEP_AFTER": f"{SETTINGS['sweep_after']:g}s",
        "BLOBLEDGER_DELETE_GRACE": f"{SETTINGS['delete_grace']:g}s",
        "BLOBLEDGER_RESUMABLE_EXPIRY": f"{SETTINGS['resumable_expiry']:g}s",
        "BLOBLEDGER_RETAG": target.retag, "BLOBLEDGER_SWEEP_INTERVAL": "0",
        "BLOBLEDGER_S3API_KEYS": f"{KEY_ID}:{SECRET}:write",
        "BLOBLEDGER_S3API_BUCKET": BUCKET, "BLOBLEDGER_LOG_LEVEL": "warning",
    }
    if failpoints:
        env["BLOBLEDGER_FAILPOINTS"] = failpoints
    if clock_offset:
        env["BLOBLEDGER_CLOCK_OFFSET"] = f"{clock_offset:g}"
    if target.store == "local":
        env["BLOBLEDGER_STORE_URL"] = f"file://{target.location}"
    elif target.store == "azure":
        assert target.connection_string is not None
        env["BLOBLEDGER_STORE_URL"] = f"azure://{target.location}"
        env["BLOBLEDGER_AZURE_CONNECTION_STRING"] = target.connection_string
    else:
        assert target.connection_string is not None
        env.update({"BLOBLEDGER_STORE_URL": f"s3://{target.location}",
                    "BLOBLEDGER_S3_ENDPOINT_URL": target.connection_string,
                    "BLOBLEDGER_S3_ADDRESSING": "path", "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"})
    return env


def s3_client(url: str) -> Any:
    """boto3's client at the endpoint: path-style, SigV4, no retry (each answer shows), a
    read timeout longer than a pause."""
    return boto3.client(
        "s3", endpoint_url=f"{url}/s3", aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}, signature_version="s3v4",
                      retries={"total_max_attempts": 1, "mode": "standard"},
                      read_timeout=CHILD_TIMEOUT, connect_timeout=5))


@dataclass
class Answer:
    """What the S3 client was told: an HTTP status and an ETag, an S3 error's code, or the
    connection lost (``status`` 0)."""

    status: int = 0
    code: str = ""
    etag: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def __str__(self) -> str:
        if self.ok:
            return "acknowledged"
        return f"`{self.code}` ({self.status})" if self.status else self.code


def ask(call: Callable[[], Any]) -> Answer:
    """Make one S3 call: its answer, whatever it was."""
    try:
        made = call()
    except ClientError as exc:
        meta = exc.response.get("ResponseMetadata", {})
        return Answer(int(meta.get("HTTPStatusCode", 0)), exc.response["Error"]["Code"])
    except BotoCoreError as exc:  # the connection closed: the server died
        return Answer(0, f"connection lost ({type(exc).__name__})")
    meta = made.get("ResponseMetadata", {})
    return Answer(int(meta.get("HTTPStatusCode", 0)), "", str(made.get("ETag", "")))


@dataclass
class Served:
    """A running server: its URL, its process, and the request in flight (a thread)."""

    url: str
    process: BaseProcess
    answer: Answer = field(default_factory=Answer)
    thread: threading.Thread | None = None

    def send(self, call: Callable[[Any], Any]) -> None:
        """Start ``call(client)`` in a thread; its answer lands in ``self.answer``."""
        client = s3_client(self.url)

        def run() -> None:
            self.answer = ask(lambda: call(client))

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    async def answered(self) -> Answer:
        assert self.thread is not None
        await asyncio.to_thread(self.thread.join, CHILD_TIMEOUT)
        assert not self.thread.is_alive(), f"no answer within {CHILD_TIMEOUT}s"
        return self.answer

    async def until(self, state: str) -> None:
        """Wait until the server's process is stopped (``T``) or gone (``''``)."""
        pid = self.process.pid
        assert pid is not None
        deadline = time.monotonic() + CHILD_TIMEOUT
        while process_state(pid) not in (state, "Z", ""):
            assert time.monotonic() < deadline, f"serve not {state or 'gone'} in time"
            await asyncio.sleep(0.005)
        if state == "T" and process_state(pid) != "T":
            raise AssertionError(f"serve exited {self.process.exitcode} before the point")

    async def died(self) -> int | None:
        await asyncio.to_thread(self.process.join, CHILD_TIMEOUT)
        return self.process.exitcode

    async def read(self, key: str) -> tuple[str, bytes]:
        """GetObject through the endpoint: the ETag and the bytes."""
        def get() -> tuple[str, bytes]:
            got = s3_client(self.url).get_object(Bucket=BUCKET, Key=key)
            return str(got["ETag"]), bytes(got["Body"].read())

        return await asyncio.to_thread(get)

    def wake(self) -> None:
        assert self.process.pid is not None
        os.kill(self.process.pid, signal.SIGCONT)


def _serve(env: dict[str, str], port: int, wake_offset: float | None, log: str) -> None:
    """In the child: ``serve`` (its module, warmed up, is the fork server's: never imported
    by the tests' own process)."""
    from tests.crash.serve_child import main

    main(env, port, wake_offset, log)


@contextlib.asynccontextmanager
async def serving(target: Target, log: Path, failpoints: str = "", *,
                  clock_offset: float = 0.0, wake_offset: float | None = None
                  ) -> AsyncIterator[Served]:
    """``blobledger serve`` on the target, its output in ``log``, until the block ends
    (SIGTERM; SIGKILL if it does not stop, or is stopped); ready (``/readyz``) when the
    block starts."""
    port = free_port()
    env = serve_env(target, failpoints, clock_offset)
    process = _CONTEXT.Process(target=_serve, args=(env, port, wake_offset, str(log)),
                               daemon=True)
    process.start()
    served = Served(f"http://127.0.0.1:{port}", process)
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        async with httpx.AsyncClient() as client:
            while True:
                assert process.exitcode is None and time.monotonic() < deadline, (
                    f"serve exited {process.exitcode} or was not ready in time:\n"
                    + (log.read_text(errors="replace")[-3000:] if log.exists() else ""))
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{served.url}/readyz", timeout=2)).status_code == 200:
                        break
                await asyncio.sleep(0.02)
        yield served
    finally:
        if process.exitcode is None and process.pid is not None:
            if process_state(process.pid) == "T":
                process.kill()
            else:
                os.kill(process.pid, signal.SIGTERM)
            await asyncio.to_thread(process.join, 10)
            if process.exitcode is None:
                process.kill()
                await asyncio.to_thread(process.join, 10)
        if served.thread is not None:
            await asyncio.to_thread(served.thread.join, CHILD_TIMEOUT)
