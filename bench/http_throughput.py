"""64 MiB through ``blobledger serve`` vs the bare SDK, upload and download.

A real ``serve`` subprocess on PostgreSQL + Azurite receives a raw 64 MiB body from an httpx
client and sends it back; the baseline uploads and downloads the same bytes straight to
Azurite with ``upload_blob``/``download_blob`` (same block size, four blocks in flight).
Both sides run in the same process, interleaved. Target: at least 0.8x the bare SDK, for
upload and for download, on loopback. With an added round-trip time, both the service and
the bare SDK reach Azurite through the same delaying proxy (ratios reported, no target).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import httpx
from azure.storage.blob.aio import ContainerClient
from tests.support.server import running_server

from bench.common import Context, Result, interleaved
from blobledger.stores.azure import BLOCK_SIZE, SINGLE_PUT_LIMIT

TITLE = "64 MiB upload and download through the HTTP service vs the bare SDK (PostgreSQL + Azurite)"
MIB = 1024 * 1024
CHUNK = MIB


async def chunks(payload: bytes) -> AsyncIterator[bytes]:
    view = memoryview(payload)
    for start in range(0, len(view), CHUNK):
        yield bytes(view[start : start + CHUNK])


async def run(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for latency_ms in ctx.latencies if not ctx.quick else (0.0,):  # --quick: loopback only
        results += await run_at(ctx, latency_ms)
    return results


async def run_at(ctx: Context, latency_ms: float) -> list[Result]:
    size = (16 if ctx.quick else 64) * MIB
    payload = os.urandom(size)
    results: list[Result] = []
    via = ctx.azure_connection_string(latency_ms)
    with running_server(ctx.azurite, ctx.postgres_url,
                        extra={"BLOBLEDGER_AZURE_CONNECTION_STRING": via}) as server:
        bare = ContainerClient.from_connection_string(
            via, f"bare{uuid.uuid4().hex[:12]}",
            max_single_put_size=SINGLE_PUT_LIMIT, max_block_size=BLOCK_SIZE,
            max_single_get_size=4 * MIB, max_chunk_get_size=4 * MIB)
        await bare.create_container()
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
            ids: list[str] = []
            names: list[str] = []

            async def http_up() -> None:
                response = await client.post(
                    "/documents", params={"name": f"h-{uuid.uuid4().hex}.bin"},
                    content=chunks(payload), headers={"Content-Length": str(size)})
                response.raise_for_status()
                ids.append(response.json()["id"])

            async def sdk_up() -> None:
                name = f"b-{uuid.uuid4().hex}.bin"
                await bare.upload_blob(name, chunks(payload), length=size, max_concurrency=4)
                names.append(name)

            async def http_down() -> None:
                got = 0
                async with client.stream("GET", f"/documents/{ids[-1]}/content") as response:
                    response.raise_for_status()
                    async for chunk in response.aiter_raw():
                        got += len(chunk)
                assert got == size

            async def sdk_down() -> None:
                got = 0
                downloader = await bare.get_blob_client(names[-1]).download_blob()
                async for chunk in downloader.chunks():
                    got += len(chunk)
                assert got == size

            await http_up()
            await sdk_up()  # warm-up
            up = await interleaved({"http": http_up, "sdk": sdk_up}, ctx.repeats)
            down = await interleaved({"http": http_down, "sdk": sdk_down}, ctx.repeats)
        await bare.delete_container()
        await bare.close()
    for what, times in (("upload", up), ("download", down)):
        http_rate, sdk_rate = size / MIB / times["http"], size / MIB / times["sdk"]
        results.append(Result(
            case=f"http {what} {size // MIB} MiB", figure_name=f"serve {what} MiB/s",
            figure=http_rate, baseline_name=f"bare SDK {what} MiB/s", baseline=sdk_rate,
            unit="MB/s", better="higher", target=None if latency_ms else 0.8,
            latency_ms=latency_ms))
    return results
