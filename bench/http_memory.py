"""Server memory while a large file streams through ``blobledger serve`` and back.

A real ``blobledger serve`` subprocess (PostgreSQL, with Azurite and with the local-disk
store) receives a 1 GiB upload (128 MiB with --quick: still twice the budget), as a raw
body and as a multipart form, then sends it back; its RSS is sampled from /proc every
20 ms. The figure is the peak growth over the RSS measured after a warm-up round trip; the
target is at most 64 MiB (the file must never be held whole). On Azure most of the growth
is the store's own buffers: the single-put head and the staged blocks in flight (see
``stores/azure.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
from tests.support.server import Server, running_server

from bench.common import Context, Result

TITLE = "server RSS growth for a streamed upload and download (serve on PostgreSQL + Azurite)"
MIB = 1024 * 1024
BUDGET_MIB = 64.0


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@contextmanager
def peak_rss(pid: int) -> Iterator[list[int]]:
    """Samples the process's RSS in a thread; yields [peak] (filled in on exit)."""
    peak = [rss_bytes(pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], rss_bytes(pid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


async def body(size: int, block: bytes, prefix: bytes = b"", suffix: bytes = b""
               ) -> AsyncIterator[bytes]:
    yield prefix
    for _ in range(size // len(block)):
        yield block
    yield suffix


async def round_trip(server: Server, name: str, size: int, block: bytes, form: bool) -> str:
    """Upload ``size`` bytes (raw or as a form), download them; the SHA-256 read back."""
    async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
        if form:
            boundary = "benchboundary"
            prefix = (f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n'
                      f'{name}\r\n--{boundary}\r\nContent-Disposition: form-data; '
                      f'name="file"; filename="{name}"\r\n\r\n').encode()
            suffix = f"\r\n--{boundary}--\r\n".encode()
            headers = {"Content-Type": f"multipart/form-data; boundary={boundary}",
                       "Content-Length": str(len(prefix) + size + len(suffix))}
            created = await client.post("/documents", content=body(size, block, prefix, suffix),
                                        headers=headers)
        else:
            created = await client.post("/documents", params={"name": name},
                                        content=body(size, block),
                                        headers={"Content-Length": str(size)})
        created.raise_for_status()
        digest = hashlib.sha256()
        async with client.stream("GET", f"/documents/{created.json()['id']}/content") as got:
            got.raise_for_status()
            async for chunk in got.aiter_bytes():
                digest.update(chunk)
        return digest.hexdigest()


async def run(ctx: Context) -> list[Result]:
    size = (128 if ctx.quick else 1024) * MIB
    block = os.urandom(MIB)
    expected = hashlib.sha256()
    for _ in range(size // MIB):
        expected.update(block)
    results = []
    with tempfile.TemporaryDirectory(prefix="blobledger-bench-") as folder:
        for store, extra in (("azure", {}), ("local", {"BLOBLEDGER_STORE_URL":
                                                       f"file://{folder}/blobs"})):
            results += await measure(ctx, store, extra, size, block, expected.hexdigest())
    return results


async def measure(ctx: Context, store: str, extra: dict[str, str], size: int, block: bytes,
                  expected: str) -> list[Result]:
    results = []
    with running_server(ctx.azurite, ctx.postgres_url, extra=extra) as server:
        pid = server.process.pid
        await round_trip(server, f"warm-up-{store}.bin", 32 * MIB, block, form=True)
        for form in (False, True):
            before = rss_bytes(pid)
            with peak_rss(pid) as peak:
                got = await round_trip(server, f"big-{store}-{form}.bin", size, block, form)
            if got != expected:
                ctx.notes.append(f"http_memory: the {size // MIB} MiB file came back altered")
            growth = (peak[0] - before) / MIB
            results.append(Result(
                case=f"serve RSS {store} {'form' if form else 'raw'} {size // MIB} MiB",
                figure_name="peak RSS growth during upload + download (MiB)", figure=growth,
                baseline_name="the budget", baseline=BUDGET_MIB, unit="MiB", better="lower",
                target=1.0, detail=f"RSS before {before / MIB:.0f} MiB, peak "
                                   f"{peak[0] / MIB:.0f} MiB"))
            await asyncio.sleep(0)
    return results
