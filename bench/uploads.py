"""Direct and resumable uploads: what ``serve`` spends, and what a cut costs.

1. A 1 GiB upload (128 MiB with --quick) to Azurite, through ``serve`` (``POST /documents``)
   and direct (``POST /uploads``, the bytes PUT to the SAS URL in one Put Blob, then
   ``complete``), on a real ``serve`` subprocess on PostgreSQL: the service's CPU time
   (utime + stime from /proc) and its peak RSS growth. The direct path's CPU is the
   completion's read-back of the bytes (hashing what the store holds: the honest check,
   paid once per upload) plus C1/C3/C4; through ``serve`` it is receiving, hashing and
   sending every byte.
2. tus resume cost: tuspy uploads 256 MiB in 64 MiB chunks to ``serve`` (local disk), the
   server is SIGKILLed mid-chunk, a second ``serve`` continues; the figure is the bytes sent
   twice (at most one chunk minus what the server had stored of it in 8 MiB parts).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import tempfile
import threading
import time

import httpx
from tests.support.server import Server, running_server
from tusclient import client as tus_client

from bench.common import Context, Result
from bench.http_memory import peak_rss, rss_bytes

TITLE = "direct vs through serve (service CPU and RSS); tus bytes re-sent after a cut"
MIB = 1024 * 1024
TUS = {"Tus-Resumable": "1.0.0"}


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chunks(size: int, block: bytes) -> io.BufferedReader:
    class Source(io.RawIOBase):
        left = size

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            n = min(len(buffer), len(block), self.left)
            buffer[:n] = block[:n]
            self.left -= n
            return n

    return io.BufferedReader(Source(), buffer_size=4 * MIB)


def through_serve(server: Server, size: int, block: bytes) -> None:
    response = httpx.post(f"{server.url}/documents", params={"name": f"serve-{size}.bin"},
                          content=chunks(size, block), timeout=900,
                          headers={"Content-Length": str(size)})
    response.raise_for_status()


def direct(server: Server, size: int, block: bytes, sha256: str) -> None:
    began = httpx.post(f"{server.url}/uploads", json={"name": "direct.bin", "size": size,
                                                      "sha256": sha256})
    began.raise_for_status()
    target = began.json()
    # one Put Blob, streamed, as `blobledger put --direct` sends it (Azurite refuses Put Block
    # under a SAS without write permission, which a create-only SAS must not have)
    put = httpx.put(target["url"], content=chunks(size, block), timeout=900,
                    headers={**target["headers"], "Content-Length": str(size)})
    put.raise_for_status()
    done = httpx.post(f"{server.url}/uploads/{target['id']}/complete", timeout=900)
    done.raise_for_status()


async def run(ctx: Context) -> list[Result]:
    return [await asyncio.to_thread(direct_cost, ctx), await asyncio.to_thread(resume_cost, ctx)]


def direct_cost(ctx: Context) -> Result:
    size = (128 if ctx.quick else 1024) * MIB
    block = os.urandom(MIB)
    digest = hashlib.sha256()
    for _ in range(size // MIB):
        digest.update(block)
    figures: dict[str, tuple[float, float, float]] = {}
    with running_server(ctx.azurite, ctx.postgres_url) as server:
        pid = server.process.pid
        through_serve(server, 16 * MIB, block)  # warm-up
        for name in ("through serve", "direct"):
            before_rss, before_cpu, started = rss_bytes(pid), cpu_seconds(pid), time.time()
            with peak_rss(pid) as peak:
                if name == "direct":
                    direct(server, size, block, digest.hexdigest())
                else:
                    through_serve(server, size, block)
            figures[name] = (cpu_seconds(pid) - before_cpu, (peak[0] - before_rss) / MIB,
                             time.time() - started)
    serve_cpu, serve_rss, serve_s = figures["through serve"]
    direct_cpu, direct_rss, direct_s = figures["direct"]
    return Result(case=f"direct upload {size // MIB} MiB (Azurite)",
               figure_name="serve CPU seconds, direct", figure=direct_cpu,
               baseline_name="serve CPU seconds, through serve", baseline=serve_cpu,
               unit="s", better="lower", target=None,
               detail=f"wall {direct_s:.1f}s vs {serve_s:.1f}s; RSS growth "
                      f"{direct_rss:.0f} vs {serve_rss:.0f} MiB; the direct CPU is the "
                      "completion's read-back hash")


def resume_cost(ctx: Context) -> Result:
    size, chunk = 256 * MIB, 64 * MIB
    data = os.urandom(size)

    class Counting(io.BytesIO):
        sent = 0

        def read(self, n: int | None = -1, /) -> bytes:
            got = super().read(n)
            self.sent += len(got)
            return got

    source = Counting(data)
    with tempfile.TemporaryDirectory(prefix="blobledger-bench-") as folder:
        env = {"BLOBLEDGER_STORE_URL": f"file://{folder}/store"}
        with running_server(ctx.azurite, ctx.postgres_url, extra=env) as first:
            uploader = tus_client.TusClient(f"{first.url}/files/").uploader(
                file_stream=source, chunk_size=chunk, retries=0,
                metadata={"filename": "resume.bin"})
            upload_id = uploader.create_url().rsplit("/", 1)[-1]
            uploader.set_url(f"{first.url}/files/{upload_id}")

            def upload() -> None:
                with contextlib.suppress(Exception):  # the kill is the point
                    uploader.upload()

            thread = threading.Thread(target=upload, daemon=True)
            thread.start()
            offset = 0
            while offset < 100 * MIB:
                offset = int(httpx.head(f"{first.url}/files/{upload_id}", headers=TUS)
                             .headers["Upload-Offset"])
                time.sleep(0.01)
            first.process.kill()
            first.process.wait(10)
            thread.join(60)
        with running_server(ctx.azurite, ctx.postgres_url, extra=env) as second:
            resumed = tus_client.TusClient(f"{second.url}/files/").uploader(
                file_stream=source, chunk_size=chunk, url=f"{second.url}/files/{upload_id}")
            durable = resumed.offset
            resumed.upload()
    resent = (source.sent - size) / MIB
    return Result(case="tus resume after a SIGKILL, 256 MiB in 64 MiB chunks",
                  figure_name="MiB sent twice", figure=resent,
                  baseline_name="one chunk", baseline=chunk / MIB, unit="MiB",
                  better="lower", target=1.0,
                  detail=f"resumed at {durable / MIB:.0f} MiB (8 MiB parts)")
