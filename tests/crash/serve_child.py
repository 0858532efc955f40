"""A real ``blobledger serve`` with its S3 endpoint, for the crash and pause matrices of the
endpoint's writers: forked from the crash tests' fork server, which has imported the service
already (a child costs a fork, not the seconds of a fresh interpreter's imports), then run
exactly as the command line runs it (``blobledger serve --port N``), configured by its
``BLOBLEDGER_*`` environment, one failpoint armed by ``BLOBLEDGER_FAILPOINTS``. It dies by a
real SIGKILL at a ``kill`` point, and stops itself (SIGSTOP) at a ``stop`` point.

A paused server given a ``wake_offset`` wakes (SIGCONT) to a clock that moved on that far,
as a process that slept would: its ledger's clock offset is set from the signal handler,
before the next bytecode of the stopped code runs (as ``tests.crash.child`` does)."""

from __future__ import annotations

import os
import signal
from typing import Any

# the service's modules, imported once by the fork server
import blobledger.api.app
import blobledger.cli.serve
import blobledger.s3api
from blobledger import cli
from blobledger.protocol.ledger import Ledger


def _warm() -> None:
    """One ``serve`` start and one signed PutObject and GetObject, in the fork server, on a
    throwaway SQLite file and folder: every module the service loads on its first start
    and first request is loaded before any child is forked (seconds per child under load).
    Nothing is left running: the event loop is closed, the files removed."""
    import asyncio
    import tempfile

    import httpx
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from blobledger.api.app import create_app
    from blobledger.config import Settings
    from blobledger.config.s3api import parse_access_keys

    async def once(folder: str) -> None:
        keys = parse_access_keys("AKIDWARM:warm-secret-0123456789:write")
        settings = Settings(database_url=f"sqlite+aiosqlite:///{folder}/warm.db",
                            store_url=f"file://{folder}/store", s3api_keys=keys)
        async with Ledger.from_settings(settings) as ledger:
            app = create_app(ledger, settings)
            blobledger.s3api.mount(app, settings)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                for method, body in (("PUT", b"warm"), ("GET", b"")):
                    signed = AWSRequest(method=method, url="http://127.0.0.1/s3/blobledger/w",
                                        data=body)
                    S3SigV4Auth(Credentials("AKIDWARM", "warm-secret-0123456789"), "s3",
                                "us-east-1").add_auth(signed)
                    answer = await http.request(method, "/s3/blobledger/w", content=body,
                                                headers=dict(signed.headers.items()))
                    assert answer.status_code == 200, answer.text

    with tempfile.TemporaryDirectory(prefix="blobledger-warm-") as folder:
        asyncio.run(once(folder))
    import uvicorn.lifespan.on
    import uvicorn.protocols.http.h11_impl  # noqa: F401


_warm()


def main(env: dict[str, str], port: int, wake_offset: float | None, log: str) -> None:
    """Entry point in the child: ``blobledger serve`` on ``port`` with ``env``, its output to
    the file ``log``; exits with the command's code when it stops (SIGTERM)."""
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    for name in [name for name in os.environ if name.startswith("BLOBLEDGER_")]:
        del os.environ[name]
    os.environ.update(env)
    if wake_offset is not None:
        ledgers: list[Ledger] = []
        made = Ledger.from_settings

        def from_settings(*args: Any, **kwargs: Any) -> Ledger:
            ledger = made(*args, **kwargs)
            ledgers.append(ledger)
            return ledger

        # the service's ledger, whose clock the wake moves
        Ledger.from_settings = staticmethod(from_settings)  # type: ignore[method-assign]

        def woken(*_: object) -> None:
            for ledger in ledgers:
                ledger.clock_offset = wake_offset

        signal.signal(signal.SIGCONT, woken)
    code = cli.main(["serve", "--port", str(port)])
    os._exit(code)
