"""A minimum rate for request bodies (``BLOBLEDGER_MIN_BODY_RATE`` bytes per second, judged
over each ``BLOBLEDGER_BODY_RATE_WINDOW`` seconds).

A client that sends a byte now and then keeps a connection and an upload slot for as long
as it likes: the body timeout only fires on silence. :class:`MinimumRate` wraps an ASGI
``receive`` and counts the time the service spends *waiting* for body bytes (time spent
storing what arrived is the service's, not the client's, and is not counted). Each time a
window's worth of waiting has passed, the bytes received during it must reach
``rate * window``; otherwise the body is too slow (:attr:`MinimumRate.too_slow` is set, and
the caller answers 408 and ends the connection).
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive

DISCONNECT: Message = {"type": "http.disconnect"}


class MinimumRate:
    def __init__(self, receive: Receive, rate: float, window: float) -> None:
        self.receive = receive
        self.rate = rate
        self.window = window
        self.waited = 0.0  # seconds spent waiting in this window
        self.got = 0  # bytes received in this window
        self.done = rate <= 0
        self.too_slow = False

    @property
    def needed(self) -> float:
        return self.rate * self.window

    async def __call__(self) -> Message:
        """The next message; :data:`DISCONNECT` once the body is too slow."""
        if self.too_slow:
            return DISCONNECT
        if self.done:
            return await self.receive()
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            message: Message | None = None
            try:
                async with asyncio.timeout(max(self.window - self.waited, 0.0)):
                    message = await self.receive()
            except TimeoutError:
                pass
            self.waited += loop.time() - started
            if message is not None:
                if message["type"] != "http.request":
                    return message
                self.got += len(message.get("body", b""))
                if not message.get("more_body", False):
                    self.done = True
                    return message
            if self.waited >= self.window:
                if self.got < self.needed:
                    self.too_slow = True
                    return DISCONNECT
                self.waited, self.got = 0.0, 0
            if message is not None:
                return message
