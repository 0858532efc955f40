"""Cases I, G and K: which uploads are create-only, how racing creates resolve, and what a
losing staged upload leaves behind.

I uploads once, then uploads again to the same name with one parameterisation of
``upload_blob``, and reports what the second call *did* (HTTP status, or ``overwrote`` when
the stored bytes changed). Nothing is assumed from the SDK's source.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContentSettings

from blobledger.experiments.common import (
    BLOCK,
    SINGLE_PUT,
    CaseResult,
    Context,
    blob_name,
    error_code,
    http,
)
from blobledger.stores.azure import CREATE_ONLY

FIRST = b"first upload"
SECOND = b"second upload, other bytes"
PAST = datetime(2000, 1, 1, tzinfo=UTC)
FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Variant:
    """One parameterisation of the second ``upload_blob`` call."""

    label: str
    kwargs: dict[str, Any]
    body: str = "bytes"  # bytes | stream | staged | iterator
    etag: str | None = None  # "current": the first upload's etag; other: used as given


VARIANTS = [
    Variant("upload_blob(data)", {}),
    Variant("upload_blob(data, overwrite=False)", {"overwrite": False}),
    Variant("upload_blob(data, overwrite=True)", {"overwrite": True}),
    Variant("upload_blob(data, tags={...})", {"tags": {"state": "pending"}}),
    Variant("upload_blob(data, metadata={...})", {"metadata": {"origin": "experiment"}}),
    Variant("upload_blob(data, max_concurrency=4)", {"max_concurrency": 4}),
    Variant("upload_blob(data, content_settings=...)",
            {"content_settings": ContentSettings(content_type="text/plain")}),
    Variant("upload_blob(data, etag=current, IfNotModified)",
            {"match_condition": MatchConditions.IfNotModified}, etag="current"),
    Variant("upload_blob(data, etag=current, IfModified)",
            {"match_condition": MatchConditions.IfModified}, etag="current"),
    Variant("upload_blob(data, etag=other, IfModified)",
            {"match_condition": MatchConditions.IfModified}, etag='"0x8D0000000000000"'),
    Variant("upload_blob(data, if_modified_since=2000-01-01)", {"if_modified_since": PAST}),
    Variant("upload_blob(data, if_unmodified_since=2100-01-01)",
            {"if_unmodified_since": FUTURE}),
    Variant("upload_blob(data, overwrite=False, if_modified_since=2000-01-01)",
            {"overwrite": False, "if_modified_since": PAST}),
    Variant("upload_blob(data, match_condition=IfMissing)", dict(CREATE_ONLY)),
    Variant("upload_blob(stream)", {}, body="stream"),
    Variant("upload_blob(stream above max_single_put_size)", {}, body="staged"),
    Variant("upload_blob(iterator, length unknown)", {}, body="iterator"),
]


def _staged_bytes(fill: bytes) -> bytes:
    """Three blocks' worth: above the single-put limit, so the SDK stages blocks."""
    size = max(3 * BLOCK, SINGLE_PUT + 1)
    return (fill * (size // len(fill) + 1))[:size]


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), 16 * 1024):
        yield data[start : start + 16 * 1024]


def _body(variant: Variant) -> tuple[Any, bytes]:
    if variant.body == "stream":
        return io.BytesIO(SECOND), SECOND
    if variant.body == "staged":
        data = _staged_bytes(b"S")
        return io.BytesIO(data), data
    if variant.body == "iterator":
        return _chunks(SECOND), SECOND
    return SECOND, SECOND


async def _second_call(ctx: Context, variant: Variant) -> dict[str, Any]:
    blob = ctx.container.get_blob_client(blob_name())
    first = await blob.upload_blob(FIRST)
    kwargs = dict(variant.kwargs)
    if variant.etag is not None:
        kwargs["etag"] = first["etag"] if variant.etag == "current" else variant.etag
    body, sent = _body(variant)
    try:
        await blob.upload_blob(body, **kwargs)
    except HttpResponseError as exc:
        return {"call": variant.label, "outcome": str(exc.status_code),
                "code": error_code(exc), "printed": http(exc)}
    stored = await (await blob.download_blob()).readall()
    outcome = "overwrote" if stored == sent else "accepted, bytes unchanged"
    return {"call": variant.label, "outcome": outcome, "code": "", "printed": outcome}


async def case_i(ctx: Context, result: CaseResult) -> None:
    calls = [await _second_call(ctx, variant) for variant in VARIANTS]
    width = max(len(call["call"]) for call in calls)
    for call in calls:
        result.say(f"{call['call']:<{width}} -> {call['printed']}")
    result.figures["calls"] = [
        {key: call[key] for key in ("call", "outcome", "code")} for call in calls]
    result.figures["refused"] = [c["call"] for c in calls if c["outcome"] in ("409", "412")]
    result.figures["overwrote"] = [c["call"] for c in calls if c["outcome"] == "overwrote"]


async def case_g(ctx: Context, result: CaseResult) -> None:
    """Five create-only uploads of one name, started together."""
    name = blob_name()
    bodies = [f"writer {i} ".encode() * 64 for i in range(5)]

    async def writer(body: bytes) -> str:
        try:
            await ctx.container.get_blob_client(name).upload_blob(body, **CREATE_ONLY)
        except HttpResponseError as exc:
            return str(exc.status_code) if exc.status_code in (409, 412) else http(exc)
        return "won"

    outcomes = await asyncio.gather(*(writer(body) for body in bodies))
    won = outcomes.count("won")
    c409, c412 = outcomes.count("409"), outcomes.count("412")
    other = [o for o in outcomes if o not in ("won", "409", "412")]
    blobs = len(await ctx.blob_names())
    stored = await (await ctx.container.get_blob_client(name).download_blob()).readall()
    winner_kept = won == 1 and stored == bodies[outcomes.index("won")]
    result.say(f"won={won} conflict409={c409} other={other} blobs={blobs}")
    result.say(f"conflict412={c412} winner's bytes stored={winner_kept}")
    result.figures.update(won=won, conflict409=c409, conflict412=c412, other=other,
                          blobs=blobs, winner_kept=winner_kept)


async def case_k(ctx: Context, result: CaseResult) -> None:
    """A staged create-only upload to a name that exists: blocks first, refusal last."""
    blob = ctx.container.get_blob_client(blob_name())
    first = _staged_bytes(b"1")
    await blob.upload_blob(first)  # above max_single_put_size: staged, create-only
    committed, _ = await blob.get_block_list("committed")
    result.say(f"first staged upload ok, size={len(first)} blocks={len(committed)}")
    status = "succeeded"
    try:
        await blob.upload_blob(_staged_bytes(b"2"))
    except HttpResponseError as exc:
        status = str(exc.status_code)
        result.say(f"second staged upload -> {http(exc)}")
    else:
        result.say("second staged upload -> succeeded")
    _, uncommitted = await blob.get_block_list("uncommitted")
    listed = [props.name async for props in ctx.container.list_blobs(
        include=["uncommittedblobs"])]
    stored = await (await blob.download_blob()).readall()
    result.say(f"blocks left uncommitted: {len(uncommitted)}")
    result.say(f"first upload's bytes intact={stored == first} listed blobs={len(listed)}")
    result.figures.update(size=len(first), committed_blocks=len(committed), status=status,
                          uncommitted_blocks=len(uncommitted),
                          uncommitted_bytes=sum(int(b.size or 0) for b in uncommitted),
                          first_intact=stored == first)
