"""How much memory the renders of one process may hold at once.

A render decodes its source whole (at most 4 bytes a pixel: RGBA, CMYK, 32-bit grey), so
it is charged ``4 * width * height`` bytes from the header before it starts, and waits
while the renders under way hold too much: together they hold at most the decode of one
largest image allowed (``4 * BLOBLEDGER_MAX_IMAGE_PIXELS``, 256 MiB by default). Small
sources render side by side; a source at the pixel limit renders alone. One budget per
event loop (``serve`` has one), first come first served.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections import deque
from collections.abc import AsyncIterator

#: bytes a decoded pixel takes, at most
PIXEL_BYTES = 4


class Budget:
    """A weighted semaphore: ``taken(cost)`` waits until ``cost`` fits beside the others."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @contextlib.asynccontextmanager
    async def taken(self, cost: int) -> AsyncIterator[None]:
        cost = max(1, min(cost, self.total))  # a larger one would never fit: it runs alone
        if self._waiting or self.used + cost > self.total:
            turn = asyncio.get_running_loop().create_future()
            self._waiting.append((cost, turn))
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self._release(cost)  # granted as it was cancelled: hand it on
                else:
                    self._waiting.remove((cost, turn))
                    self._wake()
                raise
        else:
            self.used += cost
        try:
            yield
        finally:
            self._release(cost)

    def _release(self, cost: int) -> None:
        self.used -= cost
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self.used + self._waiting[0][0] <= self.total:
            cost, turn = self._waiting.popleft()
            self.used += cost
            turn.set_result(None)


_budgets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Budget] = \
    weakref.WeakKeyDictionary()


def budget(max_pixels: int) -> Budget:
    """This event loop's budget for renders of at most ``max_pixels`` pixels each."""
    loop = asyncio.get_running_loop()
    total = PIXEL_BYTES * max_pixels
    found = _budgets.get(loop)
    if found is None or found.total != total:
        found = _budgets[loop] = Budget(total)
    return found
