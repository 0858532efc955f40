"""The ``scan`` processor: an external scanner, run as a command or called over HTTP.

A command (``BLOBLEDGER_SCAN_COMMAND``, an argv written as a shell would split it, run
without a shell) gets the bytes on its standard input, or, when an argument holds
``{path}``, in a temporary file (mode 0600, removed after) whose path replaces it. Exit 0
accepts; exit 1 rejects, with the first lines of its output as the reason; any other exit,
a signal or ``BLOBLEDGER_SCAN_TIMEOUT`` is a failure, tried again later. These are
ClamAV's own exit codes (``clamdscan --no-summary -``, ``clamscan --no-summary {path}``).
The command runs in a process group of its own: at the timeout the whole group is killed
(a shell's children, a wrapper's scanner), none left running.

An endpoint (``BLOBLEDGER_SCAN_URL``) is sent the bytes in a POST (the declared
Content-Type, their Content-Length, ``Blobledger-Document: <id>``): a 2xx answer accepts;
422 rejects, with the body's ``detail`` (problem JSON) or its first line of text as the
reason; anything else, a connection error or the timeout is a failure, tried again later.
The call ignores the environment's proxy variables and ``.netrc`` (the URL says where the
scanner is), reads at most 64 KiB of a rejection's body and nothing of another answer's, and
names the URL without its password or token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import tempfile
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from blobledger._base.redact import redact_url
from blobledger.protocol.documents import Document
from blobledger.workers.processors.base import ACCEPT, ProcessorFailed, Reader, Verdict, reject

if TYPE_CHECKING:
    import httpx

NAME = "scan"
PATH = "{path}"
#: the HTTP status by which an endpoint rejects
REJECTED = 422
#: how much of a scanner's output becomes the reason
REASON_LINES = 5


def _reason(text: str, fallback: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines[:REASON_LINES]) or fallback


class CommandScanner:
    """A scanner run as a command (exit 0 accept, 1 reject, else a failure)."""

    name = NAME

    def __init__(self, command: str, timeout: float) -> None:
        self.argv = shlex.split(command)
        self.timeout = timeout

    async def run(self, doc: Document, read: Reader) -> Verdict:
        if any(PATH in arg for arg in self.argv):
            with tempfile.TemporaryDirectory(prefix="blobledger-scan-") as folder:
                path = os.path.join(folder, "document")
                await _write(path, read(0, None))
                argv = [arg.replace(PATH, path) for arg in self.argv]
                return await self._exec(argv, None)
        return await self._exec(self.argv, read(0, None))

    async def _exec(self, argv: list[str], stdin: AsyncIterator[bytes] | None) -> Verdict:
        try:
            process = await asyncio.create_subprocess_exec(  # its own process group
                *argv, stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)
        except OSError as exc:
            raise ProcessorFailed(f"the scanner {argv[0]!r} could not start: {exc}") from None
        try:
            async with asyncio.timeout(self.timeout):
                feeding = asyncio.ensure_future(_feed(process, stdin))
                output = await process.stdout.read() if process.stdout else b""
                await feeding
                code = await process.wait()
        except TimeoutError:
            _kill_group(process)  # the scanner and whatever it started
            await process.wait()
            raise ProcessorFailed(f"the scanner ran past {self.timeout:g}s") from None
        text = output.decode("utf-8", "replace")
        if code == 0:
            return ACCEPT
        if code == 1:
            return reject(_reason(text, "the scanner rejected the document"))
        raise ProcessorFailed(f"the scanner exited {code}: {_reason(text, 'no output')}")


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL to the scanner's process group (its children too: a shell's, a daemon's
    client's), then to the scanner itself should the group be gone already."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()


async def _feed(process: asyncio.subprocess.Process,
                stdin: AsyncIterator[bytes] | None) -> None:
    """The bytes to the command's standard input (a command that stops reading early, as a
    scanner that found what it looks for may, is not an error)."""
    if stdin is None or process.stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        async for chunk in stdin:
            process.stdin.write(chunk)
            await process.stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.close()
        await process.stdin.wait_closed()


async def _write(path: str, chunks: AsyncIterator[bytes]) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as out:
        async for chunk in chunks:
            await asyncio.to_thread(out.write, chunk)


class HttpScanner:
    """A scanner behind an HTTP endpoint (2xx accept, 422 reject, else a failure)."""

    name = NAME

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout

    async def run(self, doc: Document, read: Reader) -> Verdict:
        import httpx  # here: a worker without a scanner never loads it

        headers = {"Content-Type": doc.content_type, "Blobledger-Document": doc.id}
        if doc.size is not None:  # streamed, yet not chunked: a scanner may not read chunks
            headers["Content-Length"] = str(doc.size)
        where = redact_url(self.url)
        try:  # never the environment's proxies: the scanner is where the setting says
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as client, \
                    asyncio.timeout(self.timeout), \
                    client.stream("POST", self.url, content=read(0, None),
                                  headers=headers) as response:
                body = await _bounded(response) if response.status_code == REJECTED else b""
        except (httpx.HTTPError, TimeoutError) as exc:
            raise ProcessorFailed(f"the scanner at {where} failed: "
                                  f"{type(exc).__name__}") from None
        if response.is_success:
            return ACCEPT
        if response.status_code == REJECTED:
            return reject(_answer(response, body))
        raise ProcessorFailed(f"the scanner at {where} answered {response.status_code}")


#: the most of a rejection's body that is read, decoded (its reason is cut far shorter)
ANSWER_READ = 64 * 1024


async def _bounded(response: httpx.Response) -> bytes:
    """The first :data:`ANSWER_READ` bytes of the answer's body, decoded."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= ANSWER_READ:
            break
    return bytes(body[:ANSWER_READ])


def _answer(response: httpx.Response, body: bytes) -> str:
    if "json" in response.headers.get("content-type", ""):
        with contextlib.suppress(ValueError):
            found = json.loads(body)
            detail = found.get("detail") if isinstance(found, dict) else None
            if isinstance(detail, str):
                return detail[:1000]
    return _reason(body[:4000].decode("utf-8", "replace"), "the scanner rejected the document")
