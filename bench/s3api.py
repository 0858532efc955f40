"""PutObject and GetObject of 4 KiB and 64 MiB through the S3-compatible endpoint, beside the
same operations against the bare store, in the same run, interleaved.

A real ``blobledger serve`` on PostgreSQL with its S3 endpoint (one write key) stores on
Azurite or on moto's S3 server (reached through the delaying proxy of the run's latency,
as in ``downloads``). The figure is boto3's ``put_object`` / ``get_object`` at the endpoint
(each PUT a create of a new key: C1-C4, the bytes streamed into the store as they arrive;
each GET a read of a ready document, streamed from the store). The baseline is the bare
store with no service: on moto, the same boto3 client's calls at moto's own endpoint; on
Azurite, which speaks no S3, the Azure SDK's ``upload_blob`` / ``download_blob`` (the
service's own SDK). 4 KiB is a rate (operations per second, one client at a time), 64 MiB a
throughput (MiB/s, one at a time). No targets: the ratios are the endpoint's cost, reported
for context; the detail gives ``serve``'s CPU seconds per operation or per GiB.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
from azure.storage.blob import BlobServiceClient
from botocore.config import Config
from tests.support.server import Server, running_server

from bench.common import BACKENDS, Context, Result, cpu_seconds, interleaved, rtt

TITLE = ("PutObject and GetObject, 4 KiB and 64 MiB: through the S3 endpoint (boto3) beside "
         "the bare store (moto with boto3, Azurite with the Azure SDK)")
KIB, MIB = 1024, 1024 * 1024
KEY_ID, SECRET = "AKIDBENCH", "bench-secret-0123456789"
BUCKET = "blobledger"


def s3_client(endpoint: str, key_id: str, secret: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key_id,
                        aws_secret_access_key=secret, region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"},
                                      signature_version="s3v4", read_timeout=600,
                                      retries={"max_attempts": 1, "mode": "standard"}))


@contextlib.contextmanager
def serving(ctx: Context, kind: str, latency_ms: float) -> Iterator[Server]:
    extra = {"BLOBLEDGER_S3API_KEYS": f"{KEY_ID}:{SECRET}:write",
             "BLOBLEDGER_S3API_BUCKET": BUCKET, "BLOBLEDGER_LOG_LEVEL": "warning"}
    if kind == "azure":
        extra["BLOBLEDGER_AZURE_CONNECTION_STRING"] = ctx.azure_connection_string(latency_ms)
    else:
        assert ctx.moto is not None, "the S3 cases need moto's server"
        extra.update({**ctx.moto.environment(),
                      "BLOBLEDGER_S3_ENDPOINT_URL": ctx.s3_endpoint(latency_ms),
                      "BLOBLEDGER_STORE_URL": f"s3://s3api{uuid.uuid4().hex[:12]}"})
    with running_server(ctx.azurite, ctx.postgres_url, extra=extra) as server:
        yield server


class Bare:
    """Put and get on the bare store: boto3 at moto, the Azure SDK at Azurite."""

    def __init__(self, ctx: Context, kind: str, latency_ms: float) -> None:
        self.kind = kind
        self.name = f"bare{uuid.uuid4().hex[:12]}"
        if kind == "s3":
            assert ctx.moto is not None
            self.s3 = s3_client(ctx.s3_endpoint(latency_ms), ctx.moto.access_key,
                                ctx.moto.secret_key)
            self.s3.create_bucket(Bucket=self.name)
        else:
            service = BlobServiceClient.from_connection_string(
                ctx.azure_connection_string(latency_ms))
            self.container = service.create_container(self.name)

    def put(self, key: str, body: bytes) -> None:
        if self.kind == "s3":
            self.s3.put_object(Bucket=self.name, Key=key, Body=body)
        else:
            self.container.upload_blob(key, body, overwrite=False)

    def get(self, key: str) -> int:
        if self.kind == "s3":
            return drain(self.s3.get_object(Bucket=self.name, Key=key)["Body"])
        got = 0
        for chunk in self.container.download_blob(key).chunks():
            got += len(chunk)
        return got


def drain(body: Any) -> int:
    got = 0
    while chunk := body.read(MIB):
        got += len(chunk)
    return got


class Timed:
    """``count`` puts of new keys or gets of one key, by one client, ``serve``'s CPU told."""

    def __init__(self, pid: int, body: bytes, count: int) -> None:
        self.pid, self.body, self.count = pid, body, count
        self.names = (f"{len(body)}/k{n}" for n in itertools.count())
        self.seed = f"{len(body)}/seed"  # the key every GET reads
        self.cpu = {"put": 0.0, "get": 0.0}

    def puts(self, put: Callable[[str, bytes], object], spent: str = "") -> Any:
        async def go() -> None:
            before = cpu_seconds(self.pid)
            for _ in range(self.count):
                await asyncio.to_thread(put, next(self.names), self.body)
            if spent:
                self.cpu[spent] += cpu_seconds(self.pid) - before
        return go

    def gets(self, get: Callable[[str], int], spent: str = "") -> Any:
        async def go() -> None:
            before = cpu_seconds(self.pid)
            for _ in range(self.count):
                assert await asyncio.to_thread(get, self.seed) == len(self.body)
            if spent:
                self.cpu[spent] += cpu_seconds(self.pid) - before
        return go


async def one_size(ctx: Context, kind: str, latency_ms: float, endpoint: Any, bare: Bare,
                   pid: int, size: int) -> list[Result]:
    label = {"azure": "Azurite", "s3": "S3 (moto)"}[kind]
    body = bytes(range(256)) * (size // 256)
    timed = Timed(pid, body, 1 if size > MIB else (10 if ctx.quick else 40))
    endpoint.put_object(Bucket=BUCKET, Key=timed.seed, Body=body)  # what the GETs read
    bare.put(timed.seed, body)
    put_times = await interleaved({
        "endpoint": timed.puts(lambda k, b: endpoint.put_object(Bucket=BUCKET, Key=k, Body=b),
                               "put"),
        "bare": timed.puts(bare.put)}, ctx.repeats)
    get_times = await interleaved({
        "endpoint": timed.gets(lambda k: drain(endpoint.get_object(Bucket=BUCKET,
                                                                    Key=k)["Body"]), "get"),
        "bare": timed.gets(bare.get)}, ctx.repeats)
    ops = timed.count * ctx.repeats
    results = []
    for op, times in (("PutObject", put_times), ("GetObject", get_times)):
        spent = timed.cpu["put" if op == "PutObject" else "get"]
        if size > MIB:
            rate = {name: size * timed.count / MIB / s for name, s in times.items()}
            unit, per, shown = "MB/s", "MiB/s", f"{size // MIB} MiB"
            detail = f"serve's CPU s per GiB {spent / (size * ops / 1024**3):.2f}"
        else:
            rate = {name: timed.count / s for name, s in times.items()}
            unit, per, shown = "op/s", "operations/s", f"{size // KIB} KiB"
            detail = f"serve's CPU ms per operation {spent / ops * 1000:.1f}"
        bare_name = "boto3 at moto" if kind == "s3" else "the Azure SDK at Azurite"
        results.append(Result(
            case=f"{op} {shown} {label}", figure_name=f"boto3 at the endpoint, {per}",
            figure=rate["endpoint"], baseline_name=f"{bare_name}, {per}",
            baseline=rate["bare"], unit=unit, better="higher", target=None, detail=detail,
            latency_ms=latency_ms))
        print(f"#   {results[-1].case}{rtt(latency_ms)}: endpoint {rate['endpoint']:.1f}, "
              f"bare {rate['bare']:.1f} {per}", file=sys.stderr, flush=True)
    return results


async def one_backend(ctx: Context, kind: str, latency_ms: float) -> list[Result]:
    results: list[Result] = []
    with serving(ctx, kind, latency_ms) as server:
        endpoint = s3_client(f"{server.url}/s3", KEY_ID, SECRET)
        bare = Bare(ctx, kind, latency_ms)
        for size in (4 * KIB, (16 if ctx.quick else 64) * MIB):
            results += await one_size(ctx, kind, latency_ms, endpoint, bare,
                                      server.process.pid, size)
    return results


async def run(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for latency_ms in ctx.latencies:
        for kind in BACKENDS:
            results += await one_backend(ctx, kind, latency_ms)
    return results
