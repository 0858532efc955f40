"""64 MiB downloads: through ``blobledger serve`` (proxy), through its redirect to a signed
URL, and with the bare SDK on that URL, at concurrency 1 and 16.

A real ``serve`` subprocess on PostgreSQL + Azurite holds one 64 MiB document. ``proxy``
streams it through the service; ``redirect`` asks the service (``?redirect=true``), which
answers 307 to an Azure read-only SAS that httpx follows; ``bare`` is the Azure SDK's
``download_blob`` on that SAS (no service at all). The three run interleaved in one process;
the figure is the redirect's MiB/s, the baseline the bare SDK's; the detail gives the
proxy's and the service's CPU seconds per GiB served in each mode (for a redirect, a small
constant per download: the bytes never pass through it). Target: the redirect at least
0.9x the bare SDK (within noise), on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
from azure.storage.blob.aio import BlobClient
from tests.support.server import running_server

from bench.common import Context, Result, cpu_seconds, interleaved

TITLE = "64 MiB downloads: proxied, redirected to a signed URL, bare SDK (PostgreSQL + Azurite)"
MIB = 1024 * 1024
GIB = 1024 * MIB


async def chunks(payload: bytes) -> AsyncIterator[bytes]:
    view = memoryview(payload)
    for start in range(0, len(view), MIB):
        yield bytes(view[start : start + MIB])


async def run(ctx: Context) -> list[Result]:
    size = (16 if ctx.quick else 64) * MIB
    payload = bytes(range(256)) * (size // 256)
    results: list[Result] = []
    with running_server(ctx.azurite, ctx.postgres_url) as server:
        pid = server.process.pid
        async with httpx.AsyncClient(base_url=server.url, timeout=600,
                                     follow_redirects=True) as client:
            created = await client.post("/documents", params={"name": "big.bin"},
                                        content=chunks(payload),
                                        headers={"Content-Length": str(size)})
            created.raise_for_status()
            doc = created.json()["id"]

            async def proxy() -> None:
                got = 0
                async with client.stream("GET", f"/documents/{doc}/content") as response:
                    response.raise_for_status()
                    async for chunk in response.aiter_raw():
                        got += len(chunk)
                assert got == size

            async def redirect() -> None:
                got = 0
                async with client.stream("GET", f"/documents/{doc}/content",
                                         params={"redirect": "true"}) as response:
                    response.raise_for_status()
                    assert response.history and response.history[0].status_code == 307
                    async for chunk in response.aiter_raw():
                        got += len(chunk)
                assert got == size

            url = (await client.post(f"/documents/{doc}/url")).json()["url"]

            async def bare() -> None:
                got = 0
                async with BlobClient.from_blob_url(url, max_single_get_size=4 * MIB,
                                                    max_chunk_get_size=4 * MIB) as blob:
                    downloader = await blob.download_blob()
                    async for chunk in downloader.chunks():
                        got += len(chunk)
                assert got == size

            for concurrency in (1, 16):
                cpu = {"proxy": 0.0, "redirect": 0.0, "bare": 0.0}

                def measured(name: str, one: Callable[[], Awaitable[None]],
                             many: int = concurrency,
                             spent: dict[str, float] = cpu) -> Callable[[], Awaitable[None]]:
                    async def go() -> None:
                        before = cpu_seconds(pid)
                        await asyncio.gather(*(one() for _ in range(many)))
                        spent[name] += cpu_seconds(pid) - before
                    return go

                await measured("bare", bare)()  # warm-up
                cpu = {"proxy": 0.0, "redirect": 0.0, "bare": 0.0}
                times = await interleaved({name: measured(name, func, spent=cpu)
                                           for name, func in (("proxy", proxy),
                                                              ("redirect", redirect),
                                                              ("bare", bare))}, ctx.repeats)
                served = size * concurrency * ctx.repeats / GIB
                rate = {name: size * concurrency / MIB / seconds
                        for name, seconds in times.items()}
                results.append(Result(
                    case=f"download {size // MIB} MiB c{concurrency}",
                    figure_name="redirect MiB/s", figure=rate["redirect"],
                    baseline_name="bare SDK MiB/s", baseline=rate["bare"],
                    unit="MB/s", better="higher", target=0.9,
                    detail=(f"proxy {rate['proxy']:.1f} MiB/s ({rate['proxy'] / rate['bare']:.2f}x"
                            f" bare); service CPU s per GiB: proxy "
                            f"{cpu['proxy'] / served:.2f}, redirect "
                            f"{cpu['redirect'] / served:.3f}, bare "
                            f"{cpu['bare'] / served:.3f}; per redirected download "
                            f"{cpu['redirect'] / concurrency / ctx.repeats * 1000:.1f} ms")))
    return results
