"""Making a variant on the protocol: one maker per (version, variant), the others wait.

V1 claim (:class:`blobledger.protocol.variant_steps.VariantSteps`: a ``pending`` attachment
row with a fresh, never reused blob name, naming its owner, leased), read and render (the
source's bytes and pixels capped), V2 create-only upload tagged ``pending`` (the ledger's),
confirm (still this maker's), V3 retag ``committed``, V4 attach to the version by
compare-and-set on the maker's token, under the document row's lock. A failure of a live
maker hands its claim to the deletion path at once (:meth:`Ledger.abandon`); a crash leaves
a ``pending`` row that the next request takes over once its lease lapsed (the old row fenced
to ``deleting``) and that the sweeper removes anyway after ``BLOBLEDGER_SWEEP_AFTER``.

Failpoints: ``variant.after_{claim,read,render,upload,confirm,tag,attach}``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from blobledger import failpoints
from blobledger._base.names import new_blob_name
from blobledger._base.variant_specs import FORMATS, VariantSpec
from blobledger.config import Settings
from blobledger.errors import BlobNotFound, IntentLost, NotFound
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobKind, DocumentRow, DocumentStatus
from blobledger.protocol.owners import Owner
from blobledger.protocol.transitions.records import Intent
from blobledger.protocol.transitions.statements import new_token
from blobledger.protocol.variant_owner import variant_owner
from blobledger.protocol.variant_steps import VariantSteps
from blobledger.stores.base import BlobReader
from blobledger.variants.errors import ImageRefused, UnknownVariant, VariantBusy, VersionEnded

log = logging.getLogger("blobledger.variants")
#: how often a waiting request looks again, at most (it starts at a twentieth of a second)
POLL = 0.5
#: how many claims one request may lose (taken over, swept, its version ended) before it
#: answers VariantBusy
LOSSES = 3


@dataclass(frozen=True)
class Variant:
    """A made variant of one document version: its blob and what it holds."""

    document_id: str
    version: int
    name: str
    blob: str
    size: int
    sha256: str
    md5: str
    content_type: str

    def to_json(self) -> dict[str, Any]:
        return {"document_id": self.document_id, "version": self.version, "name": self.name,
                "blob": self.blob, "size": self.size, "sha256": self.sha256,
                "content_type": self.content_type}


@dataclass(frozen=True)
class _Source:
    id: str
    version: int
    blob: str
    size: int
    content_type: str


def spec_of(ledger: Ledger, name: str) -> VariantSpec:
    """The configured variant ``name``; UnknownVariant if there is none."""
    spec = ledger.settings.variants.get(name) if isinstance(name, str) else None
    if spec is None:
        known = ", ".join(sorted(ledger.settings.variants)) or "none are configured"
        raise UnknownVariant(f"no variant {name!r} ({known})"[:300])
    return spec


def is_image(content_type: str) -> bool:
    """Whether a document's media type is an image's (its variants can be asked for)."""
    return content_type.split(";", 1)[0].strip().lower().startswith("image/")


async def make_variants(ledger: Ledger, doc_id: str, *, version: int | None = None,
                        names: Sequence[str] | None = None) -> list[Variant]:
    """The eager path: every configured variant (or those ``names``) of the document's
    ``version`` (its current one if None), made now or found made; ``[]`` for a document
    that is not an image. The document may be ``ready`` or any other state but ``pending``
    (a processor may call this before the document becomes visible). NotFound if the
    document is gone, VersionEnded if ``version`` is no longer its version, ImageRefused if
    the image is refused (too many pixels or bytes, a format not read)."""
    source = await _source(ledger, doc_id, version)
    if not is_image(source.content_type):
        return []
    wanted = list(names) if names is not None else sorted(ledger.settings.variants)
    return [await make_variant(ledger, doc_id, name, version=source.version)
            for name in wanted]


async def make_variant(ledger: Ledger, doc_id: str, name: str, *, version: int | None = None,
                       wait: float | None = None) -> Variant:
    """The variant ``name`` of the document's ``version`` (its current one if None): found
    if made, else made here (one maker wins: another request's claim is waited for, up to
    ``wait`` seconds, by default twice ``BLOBLEDGER_VARIANT_LEASE``, and taken over once its
    lease lapsed; a claim this request lost is looked at again, up to :data:`LOSSES` times).
    UnknownVariant (also for a document that is not an image), NotFound,
    VersionEnded, ImageRefused, VariantBusy (waited too long)."""
    spec = spec_of(ledger, name)
    settings = ledger.settings
    steps = VariantSteps(ledger.transitions, settings.variant_lease)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (wait if wait is not None else 2 * settings.variant_lease)
    delay, lost = POLL / 10, 0
    while True:
        source = await _source(ledger, doc_id, version)
        if not is_image(source.content_type):
            raise UnknownVariant(f"document {doc_id} is {source.content_type}, not an image: "
                                 "it has no variants")
        if source.size > settings.max_image_bytes:
            raise ImageRefused(f"the image holds {source.size} bytes, more than "
                               f"{settings.max_image_bytes}", status=422,
                               kind="image-too-large")
        if (refused := _refusals.get(_refusal_key(source, settings))) is not None:
            raise ImageRefused(str(refused), status=refused.status, kind=refused.kind)
        owner = variant_owner(doc_id, source.version, spec, settings.variant_format,
                              settings.variant_quality)
        if (row := await steps.attached(owner)) is not None:
            return _variant(source, name, row)
        intent = Intent(
            blob_name=new_blob_name(f"{settings.blob_prefix}/variants",
                                    f"{spec.name}.{settings.variant_format}"),
            document_id="", kind=BlobKind.ATTACHMENT, attempt=new_token(),
            content_type=FORMATS[settings.variant_format],
            deadline=loop.time() + settings.variant_lease)
        claim = await steps.claim(owner, doc_id, source.version, intent)
        if claim.outcome == "attached":
            assert claim.row is not None
            return _variant(source, name, claim.row)
        if claim.outcome == "gone":
            if version is not None:
                raise VersionEnded(f"version {version} of document {doc_id} has ended")
            continue  # replaced meanwhile: the new version's
        if claim.outcome == "busy":
            if loop.time() >= deadline:
                raise VariantBusy(f"variant {name!r} of document {doc_id} is being made by "
                                  "another request; retry")
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL)
            continue
        if claim.fenced:
            log.info("variant %s of %s: took over from a maker whose lease lapsed (%s)",
                     name, doc_id, claim.fenced)
        made = await _make(ledger, steps, source, spec, owner, intent)
        if made is not None:
            return made
        lost += 1  # taken over, swept or ended under this maker: look again (a few times)
        if lost > LOSSES:
            raise VariantBusy(f"variant {name!r} of document {doc_id} kept changing hands; "
                              "retry")
        if version is not None and (await _source(ledger, doc_id, None)).version != version:
            raise VersionEnded(f"version {version} of document {doc_id} has ended")


async def _make(ledger: Ledger, steps: VariantSteps, source: _Source, spec: VariantSpec,
                owner: Owner, intent: Intent) -> Variant | None:
    """V1 done: read, render, V2, confirm, V3, V4. The variant, or None if the claim was
    lost (a maker took over, or the version ended): the caller looks again."""
    from blobledger.variants.images import open_source, render  # Pillow: only when used

    settings = ledger.settings
    await failpoints.hit("variant.after_claim")
    try:
        data = await _read(ledger, source)
        await failpoints.hit("variant.after_read")
        image = open_source(data, settings.max_image_pixels)
        rendered = await asyncio.get_running_loop().run_in_executor(
            _renderer(), render, image, spec, settings.variant_format,
            settings.variant_quality)
        await failpoints.hit("variant.after_render")
        digests = await ledger.upload(intent, rendered.data)  # V2
        await failpoints.hit("variant.after_upload")
        if not await steps.confirm(intent, digests):
            await ledger.drop_lost(intent)
            return None
        await failpoints.hit("variant.after_confirm")
        await ledger.tag_committed(intent)  # V3
        await failpoints.hit("variant.after_tag")
    except IntentLost:
        return None
    except ImageRefused as refused:  # the source's bytes never change: nor will this
        _remember(_refusal_key(source, settings), refused)
        await asyncio.shield(ledger.abandon(intent))
        raise
    except BaseException:
        await asyncio.shield(ledger.abandon(intent))  # a refusal leaves nothing behind
        raise
    if not await steps.attach(intent, source.id, source.version):  # V4
        await asyncio.shield(ledger.abandon(intent))  # to the deletion path, if still ours
        return None
    await failpoints.hit("variant.after_attach")
    return Variant(source.id, source.version, spec.name, intent.blob_name, digests.size,
                   digests.sha256, digests.md5, intent.content_type)


#: sources refused lately (their blob and the limits): a refusal costs a decode, which is
#: not made again for every request (a blob's bytes never change, its name is never reused)
_refusals: OrderedDict[tuple[str, int, int], ImageRefused] = OrderedDict()
#: how many refusals are remembered, at most (the oldest forgotten first)
REFUSALS = 1024


def _refusal_key(source: _Source, settings: Settings) -> tuple[str, int, int]:
    return source.blob, settings.max_image_pixels, settings.max_image_bytes


def _remember(key: tuple[str, int, int], refused: ImageRefused) -> None:
    _refusals[key] = refused
    _refusals.move_to_end(key)
    while len(_refusals) > REFUSALS:
        _refusals.popitem(last=False)


@functools.cache
def _renderer() -> ThreadPoolExecutor:
    """The one thread that renders, for the whole process: a render decodes its source
    whole (up to 4 bytes a pixel, 256 MiB at the default pixel limit), so two at once would
    hold twice that, and the memory a thread's allocator keeps after a render is only
    reused by that same thread. Renders wait their turn here."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="blobledger-render")


async def _read(ledger: Ledger, source: _Source) -> bytes:
    """The source's bytes, at most ``max_image_bytes`` of them."""
    reader = await ledger.store.open(source.blob)
    parts, size = [], 0
    try:
        async for chunk in reader:
            size += len(chunk)
            if size > ledger.settings.max_image_bytes:
                raise ImageRefused("the image holds more bytes than "
                                   f"{ledger.settings.max_image_bytes}", status=422,
                                   kind="image-too-large")
            parts.append(chunk)
    finally:
        await reader.aclose()
    return b"".join(parts)


async def _source(ledger: Ledger, doc_id: str, version: int | None) -> _Source:
    """The document (any state but pending) at ``version`` (its current one if None)."""
    async with ledger.db.session(readonly=True) as session:
        row = await session.get(DocumentRow, doc_id) if isinstance(doc_id, str) else None
    if row is None or row.status == DocumentStatus.PENDING:
        raise NotFound(f"no document {doc_id!r}"[:200])
    if version is not None and row.version != version:
        raise VersionEnded(f"version {version} of document {doc_id} has ended "
                           f"(it is at {row.version})")
    return _Source(row.id, row.version, row.blob_name, row.size or 0, row.content_type)


def _variant(source: _Source, name: str, row: Any) -> Variant:
    return Variant(source.id, source.version, name, row.name, int(row.size), str(row.sha256),
                   str(row.md5), str(row.content_type))


async def open_variant(ledger: Ledger, doc_id: str, name: str, *,
                       version: int | None = None,
                       span: Callable[[Variant], tuple[int, int | None]] | None = None,
                       ) -> tuple[Variant, BlobReader]:
    """The variant (made if it was not) and an open read of its bytes (``span(variant)``:
    the start and length to read of them, None to the end; by default all). A variant whose
    blob was deleted under the read (its version replaced, the grace passed) is looked up
    again, on the document's new version unless ``version`` pins one."""
    for _ in range(3):
        variant = await make_variant(ledger, doc_id, name, version=version)
        start, length = (0, None) if span is None else span(variant)
        try:
            return variant, await ledger.store.open(variant.blob, start, length)
        except BlobNotFound:
            continue
    raise VariantBusy(f"variant {name!r} of document {doc_id} kept moving; retry")
