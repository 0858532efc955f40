"""Variants on the protocol, in process (the life of one on the four backend combinations,
the races and refusals on two): made on first
request and found afterwards (EXIF orientation honoured, the box kept, WebP), removed with
their version by a replace and a delete (nothing left after the sweep past the grace), made
once by two concurrent first requests, taken over from a maker paused past its lease (which
then cannot attach), and a decompression bomb refused with nothing left behind."""

from __future__ import annotations

import asyncio

import pytest

from blobledger.protocol.ledger import Ledger
from blobledger.variants import (
    ImageRefused,
    UnknownVariant,
    VersionEnded,
    make_variant,
    make_variants,
)
from blobledger.workers.invariants import check
from tests.attachments.test_attach import settle
from tests.support.holds import Holds
from tests.variants.conftest import stored_variants, variant_rows
from tests.variants.images import bomb, format_of, jpeg_rotated, png, size_of


async def read(ledger: Ledger, blob: str) -> bytes:
    reader = await ledger.store.open(blob)
    try:
        return b"".join([chunk async for chunk in reader])
    finally:
        await reader.aclose()


async def test_made_once_removed_with_its_version(ledger: Ledger) -> None:
    doc = await ledger.create("photo.jpg", jpeg_rotated(200, 100), content_type="image/jpeg")
    thumb = await make_variant(ledger, doc.id, "thumb")
    data = await read(ledger, thumb.blob)
    assert (format_of(data), thumb.content_type) == ("WEBP", "image/webp")
    assert size_of(data) == (16, 32)  # shown 100x200 (EXIF), fit into 64x32
    assert (await make_variant(ledger, doc.id, "thumb")).blob == thumb.blob  # found, not made
    made = await make_variants(ledger, doc.id)  # the eager path: the rest
    assert {v.name for v in made} == {"thumb", "square"}
    assert size_of(await read(ledger, made[0].blob)) == (24, 48)  # square=48x48
    assert set((await variant_rows(ledger)).values()) == {"attached"}
    assert (await check(ledger)).ok

    doc = await ledger.replace(doc.id, png(40, 20), expected_version=doc.version,
                               content_type="image/png")
    assert set((await variant_rows(ledger)).values()) == {"deleting"}  # with R4
    with pytest.raises(VersionEnded):
        await make_variant(ledger, doc.id, "thumb", version=1)
    small = await make_variant(ledger, doc.id, "thumb")
    # never enlarged
    assert (small.version, size_of(await read(ledger, small.blob))) == (2, (40, 20))
    await settle(ledger)
    assert await stored_variants(ledger) == [small.blob]

    await ledger.delete(doc.id)
    assert set((await variant_rows(ledger)).values()) == {"deleting"}  # with the delete
    await settle(ledger)
    assert await variant_rows(ledger) == {}
    assert await stored_variants(ledger) == []
    assert (await check(ledger, settled=True)).ok


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"])
async def test_a_replace_or_a_delete_detaches_its_own_versions_variants_only(
        ledger: Ledger) -> None:
    """R4 and the delete move to ``deleting`` the variants of the version they end, by its
    owner key: another document's variant stays attached (readable, never swept)."""
    one = await ledger.create("one.png", png(), content_type="image/png")
    other = await ledger.create("other.png", png(), content_type="image/png")
    first = await make_variant(ledger, one.id, "thumb")
    kept = await make_variant(ledger, other.id, "thumb")
    await ledger.replace(one.id, png(30, 30), expected_version=1, content_type="image/png")
    assert await variant_rows(ledger) == {first.blob: "deleting", kept.blob: "attached"}
    second = await make_variant(ledger, one.id, "thumb")
    await ledger.delete(one.id)
    assert await variant_rows(ledger) == {first.blob: "deleting", second.blob: "deleting",
                                          kept.blob: "attached"}
    await settle(ledger)
    assert await stored_variants(ledger) == [kept.blob]


@pytest.mark.parametrize("backend", ["sqlite-local"])
async def test_what_has_no_variant(ledger: Ledger) -> None:
    text = await ledger.create("notes.txt", b"hello", content_type="text/plain")
    with pytest.raises(UnknownVariant):
        await make_variant(ledger, text.id, "thumb")  # not an image
    assert await make_variants(ledger, text.id) == []
    image = await ledger.create("a.png", png(), content_type="image/png")
    with pytest.raises(UnknownVariant):
        await make_variant(ledger, image.id, "huge")  # not configured
    fake = await ledger.create("b.png", b"not an image at all", content_type="image/png")
    with pytest.raises(ImageRefused) as refused:
        await make_variant(ledger, fake.id, "thumb")
    assert (refused.value.status, refused.value.kind) == (415, "unsupported-image")
    assert await variant_rows(ledger) == {}  # a refusal leaves nothing behind


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-s3"])
async def test_a_bomb_is_refused_and_leaves_nothing(ledger: Ledger) -> None:
    boom = await ledger.create("bomb.png", bomb(), content_type="image/png")
    with pytest.raises(ImageRefused) as refused:
        await make_variant(ledger, boom.id, "thumb")
    assert (refused.value.status, refused.value.kind) == (422, "image-too-large")
    ledger.settings = ledger.settings.with_(max_image_pixels=10_000)  # the cap in settings
    big = await ledger.create("big.png", png(200, 100), content_type="image/png")
    with pytest.raises(ImageRefused, match="more than 10000"):
        await make_variant(ledger, big.id, "thumb")
    ledger.settings = ledger.settings.with_(max_image_bytes=100)  # and on the bytes
    with pytest.raises(ImageRefused, match="bytes"):
        await make_variant(ledger, big.id, "thumb")
    assert await variant_rows(ledger) == {}
    assert await stored_variants(ledger) == []


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"])
async def test_two_first_requests_make_it_once(ledger: Ledger, holds: Holds) -> None:
    doc = await ledger.create("a.png", png(), content_type="image/png")
    holds.at("variant.after_render")  # the first maker holds its claim
    first = asyncio.create_task(make_variant(ledger, doc.id, "thumb"))
    await holds.wait("variant.after_render")
    second = asyncio.create_task(make_variant(ledger, doc.id, "thumb"))
    await asyncio.sleep(0.3)
    assert not second.done()  # waiting for the first
    holds.go("variant.after_render")
    one, two = await asyncio.gather(first, second)
    assert one == two
    assert list((await variant_rows(ledger)).values()) == ["attached"]  # one blob
    assert await stored_variants(ledger) == [one.blob]


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-s3"])
@pytest.mark.parametrize("step", ["variant.after_render", "variant.after_upload",
                                  "variant.after_confirm", "variant.after_tag"])
async def test_a_maker_paused_past_its_lease_is_taken_over(
        ledger: Ledger, holds: Holds, step: str) -> None:
    doc = await ledger.create("a.png", png(), content_type="image/png")
    holds.at(step)
    paused = asyncio.create_task(make_variant(ledger, doc.id, "thumb"))
    await holds.wait(step)
    ledger.clock_offset = ledger.settings.variant_lease + 1  # its lease lapses
    taker = await make_variant(ledger, doc.id, "thumb")  # fences the claim, makes its own
    holds.go(step)
    woke = await paused  # loses every later step; reads the taker's result
    assert woke == taker
    rows = await variant_rows(ledger)
    assert rows[taker.blob] == "attached"
    assert sorted(rows.values()) == ["attached", "deleting"]  # the paused one's, fenced
    await settle(ledger)
    assert await variant_rows(ledger) == {taker.blob: "attached"}
    assert await stored_variants(ledger) == [taker.blob]
    assert (await check(ledger, settled=True)).ok


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"])
@pytest.mark.parametrize("end", ["replace", "delete"])
async def test_a_version_ended_while_its_variant_was_made(
        ledger: Ledger, holds: Holds, end: str) -> None:
    """V4 checks the maker's own document version under its row's lock: another document
    at the same version number (the bystander) never lets a variant attach to a version
    that ended."""
    await ledger.create("bystander.png", png(), content_type="image/png")
    doc = await ledger.create("a.png", png(), content_type="image/png")
    holds.at("variant.after_tag")
    maker = asyncio.create_task(make_variant(ledger, doc.id, "thumb", version=1))
    await holds.wait("variant.after_tag")
    if end == "replace":
        await ledger.replace(doc.id, png(30, 30), expected_version=1, content_type="image/png")
    else:
        await ledger.delete(doc.id)
    holds.go("variant.after_tag")
    with pytest.raises(VersionEnded if end == "replace" else Exception):
        await maker  # V4 finds the version ended: never attached to it
    assert set((await variant_rows(ledger)).values()) <= {"deleting"}
    await settle(ledger)
    assert await variant_rows(ledger) == {}
    assert await stored_variants(ledger) == []
    assert (await check(ledger, settled=True)).ok


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"])
async def test_racing_first_requests_make_it_once(ledger: Ledger) -> None:
    doc = await ledger.create("a.png", png(), content_type="image/png")
    made = await asyncio.gather(*(make_variant(ledger, doc.id, "thumb") for _ in range(4)))
    assert len({v.blob for v in made}) == 1
    assert list((await variant_rows(ledger)).values()) == ["attached"]
    assert await stored_variants(ledger) == [made[0].blob]
