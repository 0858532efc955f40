"""64 MiB downloads: through ``blobledger serve`` (proxy), through its redirect to a signed
URL, and with the bare SDK, at concurrency 1 and 16, on Azurite and on moto's S3 server,
on loopback and with each added round-trip time (``ctx.latencies``).

A real ``serve`` subprocess on PostgreSQL holds one 64 MiB document, its store reached
through the delaying proxy of the run's latency (``tests/support/latency.py``), so the
store's signed URLs point through it too. ``proxy`` streams the document through the
service; ``redirect`` asks the service (``?redirect=true``), which answers 307 to an Azure
read-only SAS or an S3 presigned GET that httpx follows; ``bare`` is the SDK with no service
at all: the Azure SDK's ``download_blob`` on that SAS (4 MiB ranges, one at a time: sixteen
GETs, as in the run on record; asked for the whole blob in one GET it was slower still,
17-32 MiB/s here), or aiobotocore's ``get_object`` of the key (one GET). The three run
interleaved in one process, with a fourth, ``url``: httpx on the signed URL alone (the
redirect's second leg, no service), which tells the service's share of a gap from the HTTP
client's (httpx against the SDK's aiohttp). The figure is the redirect's MiB/s, the baseline
the bare SDK's, both through the same proxy in the same run; the detail gives the proxy's
rate, the
service's CPU seconds per GiB in each mode (for a redirect, a small constant per download:
the bytes never pass through it), and how busy the emulator (and the delaying proxy) was
during each mode, in cores: a figure near 1.0 says that single-threaded process was the
limit, not the protocol. Target: the redirect at least 0.9x the bare SDK (within noise).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import unquote, urlsplit

import httpx
from azure.storage.blob.aio import BlobClient
from tests.support.server import Server, running_server

from bench.common import BACKENDS, Context, Result, cpu_seconds, interleaved, rtt

TITLE = ("64 MiB downloads: proxied, redirected to a signed URL, bare SDK (PostgreSQL + "
         "Azurite, and S3 on moto)")
MIB = 1024 * 1024
GIB = 1024 * MIB
MODES = ("proxy", "redirect", "bare", "url")


async def chunks(payload: bytes) -> AsyncIterator[bytes]:
    view = memoryview(payload)
    for start in range(0, len(view), MIB):
        yield bytes(view[start : start + MIB])


@contextlib.contextmanager
def serving(ctx: Context, kind: str, latency_ms: float) -> Iterator[tuple[Server, list[int]]]:
    """``serve`` on the store of ``kind``, reached through the proxy of ``latency_ms``; and
    the processes whose CPU is told beside the figures (the emulator, the proxy)."""
    if kind == "azure":
        extra = {"BLOBLEDGER_AZURE_CONNECTION_STRING": ctx.azure_connection_string(latency_ms)}
        watched = [ctx.azurite.process.pid]
    else:
        assert ctx.moto is not None, "the S3 cases need moto's server"
        extra = {**ctx.moto.environment(),
                 "BLOBLEDGER_S3_ENDPOINT_URL": ctx.s3_endpoint(latency_ms),
                 "BLOBLEDGER_STORE_URL": f"s3://dl{id(ctx) % 10**9}x{int(latency_ms)}"}
        watched = [ctx.moto.process.pid]
    if latency_ms:
        watched.append(ctx.proxies[kind, latency_ms].process.pid)
    with running_server(ctx.azurite, ctx.postgres_url, extra=extra) as server:
        yield server, watched


@contextlib.asynccontextmanager
async def bare_reader(ctx: Context, kind: str, latency_ms: float, url: str,
                      size: int) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """One download with the SDK alone, of the blob the signed ``url`` names."""
    if kind == "azure":
        async def azure() -> int:
            got = 0
            async with BlobClient.from_blob_url(url, max_single_get_size=4 * MIB,
                                                max_chunk_get_size=4 * MIB) as blob:
                downloader = await blob.download_blob()
                async for chunk in downloader.chunks():
                    got += len(chunk)
            return got
        yield azure
        return
    assert ctx.moto is not None
    bucket, _, key = urlsplit(url).path.lstrip("/").partition("/")
    store = ctx.moto.store(endpoint_url=ctx.s3_endpoint(latency_ms))  # for its client

    async def s3() -> int:
        client = await store._client()
        response = await client.get_object(Bucket=bucket, Key=unquote(key))
        got = 0
        async with response["Body"] as body:
            while chunk := await body.read(MIB):
                got += len(chunk)
        return got
    try:
        yield s3
    finally:
        await store.close()


async def one_backend(ctx: Context, kind: str, latency_ms: float, size: int,
                      payload: bytes) -> list[Result]:
    results: list[Result] = []
    async with contextlib.AsyncExitStack() as stack:
        server, watched = stack.enter_context(serving(ctx, kind, latency_ms))
        pid = server.process.pid
        async with httpx.AsyncClient(base_url=server.url, timeout=600,
                                     follow_redirects=True) as client:
            name = f"big-{kind}-{latency_ms:g}.bin"  # one database for every backend
            created = await client.post("/documents", params={"name": name},
                                        content=chunks(payload),
                                        headers={"Content-Length": str(size)})
            created.raise_for_status()
            doc = created.json()["id"]
            url = (await client.post(f"/documents/{doc}/url")).json()["url"]
            bare_one = await stack.enter_async_context(
                bare_reader(ctx, kind, latency_ms, url, size))

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

            async def bare() -> None:
                assert await bare_one() == size

            async def signed() -> None:  # the redirect's second leg alone: no service
                got = 0
                async with client.stream("GET", url) as response:
                    response.raise_for_status()
                    async for chunk in response.aiter_raw():
                        got += len(chunk)
                assert got == size

            for concurrency in (1, 16):
                cpu = dict.fromkeys(MODES, 0.0)
                busy = dict.fromkeys(MODES, 0.0)

                def measured(name: str, one: Callable[[], Awaitable[None]],
                             many: int = concurrency, spent: dict[str, float] = cpu,
                             load: dict[str, float] = busy) -> Callable[[], Awaitable[None]]:
                    async def go() -> None:
                        loop = asyncio.get_running_loop()
                        before, others = cpu_seconds(pid), [cpu_seconds(p) for p in watched]
                        began = loop.time()
                        await asyncio.gather(*(one() for _ in range(many)))
                        took = max(loop.time() - began, 1e-9)
                        spent[name] += cpu_seconds(pid) - before
                        load[name] = max(load[name], *(
                            (cpu_seconds(p) - b) / took
                            for p, b in zip(watched, others, strict=True)))
                    return go

                await measured("bare", bare)()  # warm-up
                cpu.update(dict.fromkeys(MODES, 0.0))
                busy.update(dict.fromkeys(MODES, 0.0))
                times = await interleaved({name: measured(name, func) for name, func in
                                           (("proxy", proxy), ("redirect", redirect),
                                            ("bare", bare), ("url", signed))}, ctx.repeats)
                served = size * concurrency * ctx.repeats / GIB
                rate = {name: size * concurrency / MIB / seconds
                        for name, seconds in times.items()}
                label = {"azure": "Azurite", "s3": "S3 (moto)"}[kind]
                results.append(Result(
                    case=f"download {size // MIB} MiB c{concurrency} {label}",
                    figure_name="redirect MiB/s", figure=rate["redirect"],
                    baseline_name="bare SDK MiB/s", baseline=rate["bare"],
                    unit="MB/s", better="higher", target=0.9, latency_ms=latency_ms,
                    detail=(f"proxy {rate['proxy']:.1f} MiB/s ({rate['proxy'] / rate['bare']:.2f}x"
                            f" bare); the signed URL alone with httpx {rate['url']:.1f} MiB/s "
                            f"(redirect {rate['redirect'] / rate['url']:.2f}x of it); "
                            f"service CPU s per GiB: proxy "
                            f"{cpu['proxy'] / served:.2f}, redirect "
                            f"{cpu['redirect'] / served:.3f}, bare "
                            f"{cpu['bare'] / served:.3f}; per redirected download "
                            f"{cpu['redirect'] / concurrency / ctx.repeats * 1000:.1f} ms; "
                            f"busiest of emulator{' and proxy' if latency_ms else ''}, "
                            f"in cores: proxy {busy['proxy']:.2f}, redirect "
                            f"{busy['redirect']:.2f}, bare {busy['bare']:.2f}")))
                print(f"#   {results[-1].case}{rtt(latency_ms)}: redirect "
                      f"{rate['redirect']:.0f}, bare {rate['bare']:.0f}, proxy "
                      f"{rate['proxy']:.0f} MiB/s", file=sys.stderr, flush=True)
    return results


async def run(ctx: Context) -> list[Result]:
    size = (16 if ctx.quick else 64) * MIB
    payload = bytes(range(256)) * (size // 256)
    results: list[Result] = []
    for latency_ms in ctx.latencies:
        for kind in BACKENDS:
            results += await one_backend(ctx, kind, latency_ms, size, payload)
    return results
