"""Holding writers at named protocol steps, in process: the failpoints' hook, per arrival."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

STEP = 10.0  # seconds: how long each wait for a held writer may take at most


class Holds:
    """Holds writers at named failpoints (in-process): ``at(point)`` holds the next arrival
    there, ``wait(point, n)`` waits until n arrivals are held, ``go(point, i)`` releases the
    i-th one."""

    def __init__(self) -> None:
        self.budget: dict[str, int] = {}
        self.held: dict[str, list[asyncio.Event]] = {}
        self.arrived = asyncio.Condition()

    def at(self, point: str) -> None:
        self.budget[point] = self.budget.get(point, 0) + 1

    async def hit(self, point: str) -> None:
        if self.budget.get(point, 0) > 0:
            self.budget[point] -= 1
            release = asyncio.Event()
            async with self.arrived:
                self.held.setdefault(point, []).append(release)
                self.arrived.notify_all()
            await release.wait()

    async def wait(self, point: str, count: int = 1) -> None:
        async with asyncio.timeout(STEP), self.arrived:
            await self.arrived.wait_for(lambda: len(self.held.get(point, [])) >= count)

    def go(self, point: str, index: int = 0) -> None:
        self.held[point][index].set()

    def release_all(self) -> None:
        for events in self.held.values():
            for event in events:
                event.set()


def stalling(first: bytes, rest: bytes) -> tuple[AsyncIterator[bytes], asyncio.Event,
                                                  asyncio.Event]:
    """A body that yields ``first``, sets ``sent`` and waits for ``gate`` before it yields
    ``rest``: the body, ``sent`` and ``gate``."""
    sent, gate = asyncio.Event(), asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield first
        sent.set()
        await gate.wait()
        yield rest

    return body(), sent, gate
