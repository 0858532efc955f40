"""Imported by the fork server before it forks a child (:mod:`tests.support.forkserver`):
aiobotocore, and botocore's S3 service model, endpoint rules and partitions parsed into the
data loader every S3 store of the process shares. A child that opens an S3 store inherits
them and only creates its client (about 1.5 s less per child, the cost of an S3 crash case).
No request is sent: creating a client opens no connection."""

from __future__ import annotations

import asyncio


async def _warm() -> None:
    from blobledger.stores.s3 import S3Store

    store = S3Store("warm-up", endpoint_url="http://127.0.0.1:9", region="us-east-1",
                    path_style=True, access_key="warm", secret_key="warm")
    await store._client()
    await store.close()


asyncio.run(_warm())
