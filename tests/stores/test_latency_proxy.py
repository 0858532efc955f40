"""The benchmarks' latency proxy (tests/support/latency.py) adds exactly one delay per
request/response exchange, streams large bodies through intact, and works in front of both
Azurite and moto's S3 server. Counted, not timed (but for one generous lower bound)."""

from __future__ import annotations

import os
import time

from blobledger.stores.azure import AzureStore
from tests.stores.contract import PENDING, new_name, read_all, stream
from tests.support.latency import LatencyProxy, start_process
from tests.support.services import Azurite, MotoS3, connection_string


async def test_one_delay_per_exchange_in_front_of_azurite(azurite: Azurite) -> None:
    with LatencyProxy(azurite.port, delay=0.05) as proxy:
        store = AzureStore(f"lat{os.urandom(6).hex()}",
                           connection_string=connection_string(proxy.port))
        await store.prepare()
        async with store:
            name = new_name()
            before = proxy.exchanges
            started = time.perf_counter()
            await store.put(name, stream(b"x" * 1000), tags=PENDING)  # one Put Blob
            await store.get_tags(name)                                # one Get Blob Tags
            await store.get_tags(name)
            elapsed = time.perf_counter() - started
            assert proxy.exchanges - before == 3
            assert elapsed >= 3 * 0.05  # each exchange held at least the delay
            await store.delete(name, if_tags=PENDING)
            await store._client().delete_container()


async def test_large_bodies_stream_through_intact(azurite: Azurite) -> None:
    with LatencyProxy(azurite.port, delay=0.0) as proxy:
        store = AzureStore(f"lat{os.urandom(6).hex()}",
                           connection_string=connection_string(proxy.port),
                           single_put_limit=1 << 20, block_size=1 << 20)
        await store.prepare()
        async with store:
            name, data = new_name(), os.urandom(5 * (1 << 20) + 123)
            digests = await store.put(name, stream(data, 1 << 18), tags=PENDING)
            assert (await store.stat(name)).sha256 == digests.sha256
            assert await read_all(store, name) == data
            assert proxy.exchanges >= 7  # five blocks, the block list, a read at least
            await store._client().delete_container()


async def test_in_front_of_moto_as_a_process(moto: MotoS3) -> None:
    proxy = start_process(moto.port, 20)
    try:
        store = moto.store(endpoint_url=f"http://127.0.0.1:{proxy.port}")
        await store.prepare()
        async with store:
            name, data = new_name(), os.urandom(300_000)
            await store.put(name, stream(data), tags=PENDING)
            assert await read_all(store, name) == data
            assert await store.get_tags(name) == PENDING
    finally:
        proxy.stop()
    assert proxy.process.returncode == 0
