"""Small asyncio helpers shared by the workers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from typing import TypeVar

T = TypeVar("T")


class _End:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


async def prefetch(source: AsyncIterable[T], size: int) -> AsyncIterator[T]:
    """Iterate ``source`` in a background task, up to ``size`` items ahead of the consumer.

    Two streams merged side by side (a store listing and database pages) then wait on the
    network at the same time instead of one after the other, in bounded memory.
    """
    queue: asyncio.Queue[T | _End] = asyncio.Queue(maxsize=size)

    async def pump() -> None:
        try:
            async for item in source:
                await queue.put(item)
        except Exception as exc:
            await queue.put(_End(exc))
            return
        await queue.put(_End())

    task = asyncio.create_task(pump())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
