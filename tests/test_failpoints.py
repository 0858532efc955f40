"""Failpoints in-process: the hook sees every point in order, in the task that reached it;
without actions or a hook nothing is watched."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blobledger import failpoints


async def _two_chunks() -> AsyncIterator[bytes]:
    yield b"a"
    yield b"b"


async def test_hook_sees_every_point_before_the_action() -> None:
    seen: list[str] = []

    async def hook(point: str) -> None:
        seen.append(point)

    failpoints.set_hook(hook)
    try:
        failpoints.configure("create.after_tag=raise")  # configure keeps the hook
        await failpoints.hit("create.after_insert")
        chunks = [c async for c in failpoints.stream(_two_chunks(), "put.mid_stream")]
        with pytest.raises(failpoints.FailpointError):
            await failpoints.hit("create.after_tag")
    finally:
        failpoints.configure("")
        failpoints.set_hook(None)
    assert chunks == [b"a", b"b"]
    assert seen == ["create.after_insert", "put.mid_stream", "put.mid_stream",
                    "create.after_tag"]


async def test_nothing_configured_means_nothing_watched() -> None:
    failpoints.configure("")
    failpoints.set_hook(None)
    assert not failpoints._ACTIVE
    data = _two_chunks()
    assert failpoints.stream(data, "put.mid_stream") is data
    await failpoints.hit("create.after_insert")  # no action, no hook: returns
