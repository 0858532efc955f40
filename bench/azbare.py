"""The Azure store's requests for a 4 KiB create on the bare SDK: what Azurite and the SDK
charge for the ledger's extra request (the retag), with no ledger, no database and no
hashing of ours. ``azure.storage.blob.aio``, one container client, against Azurite, the
forms interleaved in the same run, 16 concurrent, at loopback and at each added latency:

- a plain Put Blob (what the naive handler sends);
- the store's single put: Put Blob create-only (``If-None-Match: *``) with the ledger's
  three tags, its metadata and Content-MD5;
- the store's put, then the retag: Set Blob Tags of ``committed`` conditioned on
  ``pending`` (``x-ms-if-tags``), as Azure's retag sends it (Azurite ignores the
  condition; the request is the same);
- the same two requests as the store now sends them, each a request of its own
  (``stores/azure/lean.py``), the put alone and the put then the retag.

The detail gives Azurite's CPU per operation (``/proc``) apart from this process's. No
targets: these rows say which part of the ledger's gap on Azurite is the cost of the retag
request itself (the server's and the SDK's), measured beside the naive handler's put. The
trials have ``200 x --scale`` operations (as the retag case's sustained 4 KiB trials).
"""

from __future__ import annotations

import base64
import hashlib
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from azure.core.pipeline.transport import AioHttpTransport
from azure.storage.blob import ContentSettings
from azure.storage.blob.aio import BlobServiceClient

from bench.common import Context, Result
from bench.s3bare import measure, results
from blobledger.stores.azure.conditions import CREATE_ONLY
from blobledger.stores.azure.lean import LeanRequests

TITLE = "Azure on the bare SDK: Put Blob, the store's put, the store's put then its retag"
KIB = 1024
TAGS = {"state": "pending", "sha256": "0" * 64, "md5": "0" * 32}
COMMITTED = {**TAGS, "state": "committed"}
METADATA = {"sha256": "0" * 64, "md5": "0" * 32}


class Forms:
    """The forms of a 4 KiB put timed here, on one container client."""

    def __init__(self, container: Any, data: bytes, lean: LeanRequests) -> None:
        self.container, self.data, self.lean = container, data, lean
        md5 = hashlib.md5(data, usedforsecurity=False).digest()
        self.settings = ContentSettings(content_type="application/octet-stream",
                                        content_md5=bytearray(md5))
        self.md5 = base64.b64encode(md5).decode()

    async def plain(self, key: str) -> None:
        await self.container.upload_blob(key, self.data, overwrite=True)

    async def as_store(self, key: str) -> None:
        await self.container.get_blob_client(key).upload_blob(
            self.data, blob_type="BlockBlob", overwrite=False, length=len(self.data),
            tags=TAGS, metadata=METADATA, content_settings=self.settings, **CREATE_ONLY)

    async def then_retag(self, key: str) -> None:
        blob = self.container.get_blob_client(key)
        await blob.upload_blob(
            self.data, blob_type="BlockBlob", overwrite=False, length=len(self.data),
            tags=TAGS, metadata=METADATA, content_settings=self.settings, **CREATE_ONLY)
        await blob.set_blob_tags(COMMITTED, if_tags_match_condition="\"state\"='pending'")

    async def own(self, key: str) -> None:
        await self.lean.upload_blob(key, self.data, tags=TAGS, metadata=METADATA,
                                    content_type="application/octet-stream",
                                    content_md5=self.md5, if_none_match="*")

    async def own_then_retag(self, key: str) -> None:
        await self.own(key)
        await self.lean.set_blob_tags(key, COMMITTED,
                                      if_tags_match_condition="\"state\"='pending'")

    def all(self) -> dict[str, Callable[[str], Awaitable[object]]]:
        return {"plain": self.plain, "as_store": self.as_store, "then_retag": self.then_retag,
                "own": self.own, "own_then_retag": self.own_then_retag}


async def at_latency(ctx: Context, latency_ms: float) -> list[Result]:
    assert ctx.azurite is not None, "this case needs Azurite"
    service = BlobServiceClient.from_connection_string(
        ctx.azure_connection_string(latency_ms))
    container = service.get_container_client(f"bare{uuid.uuid4().hex[:12]}")
    await container.create_container()
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
    lean = LeanRequests.of(container, AioHttpTransport(session=session, session_owner=False),
                           session, retries=0, backoff=0, jitter=0, connection_timeout=20,
                           read_timeout=60)
    assert lean is not None, "an account key signs these requests"
    try:
        figures = await measure(ctx, ctx.azurite.process.pid,
                                Forms(container, os.urandom(4 * KIB), lean).all(),
                                (64 if ctx.quick else 200) * ctx.scale, 16)
        return results("azure bare 4 KiB c16", figures, "plain", {
            "plain": "Put Blob", "as_store": "the store's put (SDK)",
            "then_retag": "the store's put, then its retag (SDK)",
            "own": "the store's put, a request of its own",
            "own_then_retag": "the store's put, then its retag, requests of their own"},
            "4 KiB puts/s", latency_ms, server="Azurite")
    finally:
        await session.close()
        await container.delete_container()
        await service.close()


async def run(ctx: Context) -> list[Result]:
    return [r for latency_ms in ctx.latencies for r in await at_latency(ctx, latency_ms)]
