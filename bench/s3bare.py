"""The S3 store's requests on the bare SDK: what moto's server charges for each form of the
create's upload, with no ledger, no database and no hashing of ours. aiobotocore, one
client configured as the store's (SigV4, path-style, a signed payload over HTTP), against
moto's server, the forms interleaved in the same run:

64 MiB, one at a time and 16 at once: one PutObject of the bytes (what the naive
handler sends) against the same bytes as the store's multipart upload
(CreateMultipartUpload with the tags, 8 MiB parts with four in flight,
CompleteMultipartUpload with ``If-None-Match: *``), and one create-only PutObject as the
store's single put sends it (``If-None-Match: *``, ``Content-MD5``, the three tags). The
bucket is emptied after each trial, untimed (moto keeps every byte in memory).

4 KiB, 16 concurrent: a plain PutObject (the naive handler's) against the store's single
put (``If-None-Match: *``, ``Content-MD5``, three tags in ``x-amz-tagging``), the plain put
with the tags alone, the plain put followed by a PutObjectTagging of three tags (the
deferred retag's write), and the put with its tags followed by the store's whole retag
(GetObjectTagging, then PutObjectTagging: S3 has no conditional tag write, so the store
compares the tags it read), at loopback and at each added latency.

The detail gives moto's server CPU per operation (``/proc``, all its threads) apart from
this process's. No targets: these rows say which part of the ledger's gap on S3 is moto's
cost of the requests the store sends, measured beside the naive handler's request.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import Context, Result, cpu_seconds
from blobledger.stores.s3.store import PART_SIZE, PARTS_IN_FLIGHT

TITLE = "S3 on the bare SDK: PutObject vs the store's multipart upload, tags on and after a put"
KIB, MIB = 1024, 1024 * 1024
TAGS = {"state": "pending", "sha256": "0" * 64, "md5": "0" * 32}
TAGGING = "&".join(f"{k}={v}" for k, v in sorted(TAGS.items()))
TAG_SET = {"TagSet": [{"Key": k, "Value": v} for k, v in sorted(TAGS.items())]}


async def multipart(s3: Any, bucket: str, key: str, data: bytes, part_size: int = PART_SIZE,
                    window: int = PARTS_IN_FLIGHT) -> None:
    """The store's multipart upload of ``data`` (its tags on the creation, ``window`` parts
    in flight, the completion create-only), with none of its hashing."""
    created = await s3.create_multipart_upload(Bucket=bucket, Key=key, Tagging=TAGGING,
                                               ContentType="application/octet-stream")
    upload_id = created["UploadId"]
    etags: dict[int, str] = {}
    semaphore = asyncio.Semaphore(window)

    async def part(number: int, chunk: bytes) -> None:
        async with semaphore:
            answer = await s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id,
                                          PartNumber=number, Body=chunk)
        etags[number] = answer["ETag"]

    view = memoryview(data)
    await asyncio.gather(*(part(i // part_size + 1, bytes(view[i:i + part_size]))
                           for i in range(0, len(data), part_size)))
    await s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload_id, IfNoneMatch="*",
        MultipartUpload={"Parts": [{"ETag": etags[n], "PartNumber": n} for n in sorted(etags)]})


def store_put_args(data: bytes) -> dict[str, str]:
    """The store's single put's headers beside the body: create-only, Content-MD5, tags."""
    md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
    return {"IfNoneMatch": "*", "ContentMD5": md5, "Tagging": TAGGING,
            "ContentType": "application/octet-stream"}


async def gather_limited(n: int, concurrency: int,
                         one: Callable[[int], Awaitable[object]]) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with semaphore:
            await one(i)

    await asyncio.gather(*(limited(i) for i in range(n)))


async def measure(ctx: Context, server: int,
                  forms: dict[str, Callable[[str], Awaitable[object]]], n: int,
                  concurrency: int, after: Callable[[], Awaitable[object]] | None = None
                  ) -> dict[str, tuple[float, float, float]]:
    """Per form: (operations per second, this process's CPU ms per operation, the storage
    server's (process ``server``) CPU ms per operation), medians of ``ctx.repeats``
    interleaved trials of ``n`` operations; ``after`` runs after each trial, untimed."""
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in forms}

    async def trial(form: Callable[[str], Awaitable[object]]) -> tuple[float, float, float]:
        tag = uuid.uuid4().hex[:8]
        mine, theirs = cpu_seconds(os.getpid()), cpu_seconds(server)
        started = time.perf_counter()
        await gather_limited(n, concurrency, lambda i: form(f"{tag}/{i}.bin"))
        wall = time.perf_counter() - started
        mine, theirs = cpu_seconds(os.getpid()) - mine, cpu_seconds(server) - theirs
        if after is not None:
            await after()
        return n / wall, mine / n * 1000, theirs / n * 1000

    for form in forms.values():  # warm-up: connections, the server's first requests
        await trial(form)
    for _ in range(ctx.repeats):
        for name, form in forms.items():
            found[name].append(await trial(form))
    return {name: (statistics.median(r for r, _, _ in v), statistics.median(c for _, c, _ in v),
                   statistics.median(s for _, _, s in v)) for name, v in found.items()}


async def empty_bucket(s3: Any, bucket: str) -> None:
    listed = await s3.list_objects_v2(Bucket=bucket)
    while keys := [{"Key": o["Key"]} for o in listed.get("Contents", [])]:
        await s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})
        listed = await s3.list_objects_v2(Bucket=bucket)


def results(case: str, figures: dict[str, tuple[float, float, float]], baseline: str,
            names: dict[str, str], unit: str, latency_ms: float, server: str = "moto"
            ) -> list[Result]:
    cpu = ", ".join(f"{names[k]} {c:.1f} + {s:.1f}" for k, (_, c, s) in figures.items())
    base = figures[baseline][0]
    return [Result(case=f"{case}: {names[name]}", figure_name=f"{names[name]} {unit}",
                   figure=rate, baseline_name=f"{names[baseline]} {unit}", baseline=base,
                   unit="/s", better="higher", target=None,
                   detail=f"CPU ms per operation, this process + {server}: {cpu}",
                   latency_ms=latency_ms)
            for name, (rate, _, _) in figures.items() if name != baseline]


class Forms:
    """The forms of a put timed here, on one client and bucket."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket

    async def plain(self, key: str, data: bytes) -> None:
        await self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)

    async def tagged(self, key: str, data: bytes) -> None:
        await self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, Tagging=TAGGING)

    async def as_store(self, key: str, data: bytes) -> None:
        await self.s3.put_object(Bucket=self.bucket, Key=key, Body=data,
                                 **store_put_args(data))

    async def then_tagging(self, key: str, data: bytes) -> None:
        await self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
        await self.s3.put_object_tagging(Bucket=self.bucket, Key=key, Tagging=TAG_SET)

    async def then_retag(self, key: str, data: bytes) -> None:
        """The put, then the store's retag: its tags read, then written."""
        await self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, Tagging=TAGGING)
        await self.s3.get_object_tagging(Bucket=self.bucket, Key=key)
        await self.s3.put_object_tagging(Bucket=self.bucket, Key=key, Tagging=TAG_SET)

    async def multipart(self, key: str, data: bytes) -> None:
        await multipart(self.s3, self.bucket, key, data)

    def of(self, data: bytes, *names: str) -> dict[str, Callable[[str], Awaitable[object]]]:
        """The named forms, each putting ``data`` under the key it is given."""
        def bound(name: str) -> Callable[[str], Awaitable[object]]:
            form = getattr(self, name)
            return lambda key: form(key, data)
        return {name: bound(name) for name in names}


async def at_latency(ctx: Context, latency_ms: float) -> list[Result]:
    assert ctx.moto is not None, "this case needs moto's server"
    store = ctx.moto.store(endpoint_url=ctx.s3_endpoint(latency_ms))
    await store.prepare()
    s3 = await store._client()  # the store's client: its configuration, nothing of its own
    forms = Forms(s3, store.bucket)
    out: list[Result] = []
    try:
        figures = await measure(ctx, ctx.moto.process.pid, forms.of(
            os.urandom(4 * KIB), "plain", "tagged", "as_store", "then_tagging", "then_retag"),
            64 if ctx.quick else 200, 16)
        out += results("bare 4 KiB c16", figures, "plain", {
            "plain": "PutObject", "tagged": "PutObject+tags", "as_store": "the store's put",
            "then_tagging": "PutObject, then tagging",
            "then_retag": "put+tags, then retag"}, "4 KiB puts/s", latency_ms)
        await empty_bucket(s3, store.bucket)
        if latency_ms:  # bandwidth, not round trips, bounds the large puts
            return out
        unit = "1 MiB" if ctx.quick else "64 MiB"
        large = forms.of(os.urandom((1 if ctx.quick else 64) * MIB),
                         "plain", "multipart", "as_store")
        for concurrency, count in ((1, 1), (16, 16)) if ctx.quick else ((1, 2), (16, 16)):
            figures = await measure(ctx, ctx.moto.process.pid, large, count, concurrency,
                                    after=lambda: empty_bucket(s3, store.bucket))
            out += results(f"bare {unit} c{concurrency}", figures, "plain", {
                "plain": "PutObject", "multipart": "the store's multipart",
                "as_store": "the store's put"}, f"{unit} puts/s", latency_ms)
    finally:
        await store.close()
    return out


async def run(ctx: Context) -> list[Result]:
    return [r for latency_ms in ctx.latencies for r in await at_latency(ctx, latency_ms)]
