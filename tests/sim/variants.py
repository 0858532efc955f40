"""Variants: makers of one document version's variant racing each other (two processes at
once, as two requests for a thumbnail), a replace or a delete of the document beside them
now and then, on the real steps (V1 claim, the take-over of a lapsed claim, V2 upload,
confirm, V3 retag, V4 attach, R4's and the delete's detach).

The rendering is the harness's (:func:`rendering`: the bytes of a variant are a digest of
its source's and its spec's, made at once): Pillow decodes and resizes, which is compute,
not protocol, and costs a run more than its steps. The checks: two makers of one
version's variant that both answered name one blob (one maker wins); what they answered is
the rendering of that version's bytes; read again once the race is over, the document's
current variant is the rendering of its current bytes (or of a replace not answered). The
invariants check the attached variants (I1, I3: each on a version that still exists).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sys
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from blobledger.variants.maker import make_variant, open_variant

if TYPE_CHECKING:
    from tests.sim.sim import _Run

VARIANT = "thumb"
#: the settings a run with variant makers adds
VARIANT_SETTINGS: dict[str, Any] = {"variants": f"{VARIANT}=64x64", "variant_format": "png",
                                    "variant_lease": 60.0}


def rendered(source: bytes, spec_name: str) -> bytes:
    """The harness's rendering of ``source`` as the variant ``spec_name``."""
    return b"variant " + spec_name.encode() + b" of " + hashlib.sha256(source).hexdigest().encode()


@contextlib.contextmanager
def rendering(on: bool) -> Iterator[None]:
    """While open (``on``), ``blobledger.variants.images`` is the harness's rendering."""
    if not on:
        yield
        return
    module = types.ModuleType("blobledger.variants.images")

    def open_source(data: bytes, max_pixels: int) -> bytes:
        return data

    def render(image: bytes, spec: Any, fmt: str, quality: int) -> Any:
        return types.SimpleNamespace(data=rendered(image, spec.name), content_type="image/png",
                                     width=spec.width, height=spec.height)

    module.open_source = open_source  # type: ignore[attr-defined]
    module.render = render  # type: ignore[attr-defined]
    saved = sys.modules.get(module.__name__)
    sys.modules[module.__name__] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(module.__name__, None)
        else:
            sys.modules[module.__name__] = saved


async def variant_maker(run: _Run, n: int) -> None:
    """Images created, then each one's variant asked of two processes at once (pinned to
    version 1), a replace (one time in three) or a delete (one in six) beside them."""
    from tests.sim.sim import _short

    writer, here, there = run.ledger(), run.ledger(), run.ledger()
    for i in range(run.config.ops):
        name = run.rng.choice(run.names) + f"-v{n}.{i}.png"
        data = f"v{n} image{i} {run.rng.getrandbits(32)}".encode()
        outcome, doc = await run.op(f"v{n}.create", lambda: writer.create(
            name, data, content_type="image/png"))  # noqa: B023
        run.note(f"v{n} image {name}: {outcome} {_short(doc)}")
        if outcome == "ok":
            run.result.acknowledged += 1
            await _race(run, n, (writer, here, there), doc.id, data)


async def _race(run: _Run, n: int, sides: tuple[Any, Any, Any], doc_id: str,
                data: bytes) -> None:
    from tests.sim.sim import Violation, _short

    writer, here, there = sides
    racing = [run.op(f"v{n}.make", lambda: make_variant(here, doc_id, VARIANT, version=1)),
              run.op(f"v{n}.make'", lambda: make_variant(there, doc_id, VARIANT, version=1))]
    change = run.rng.random()
    replaced = f"v{n} replaced {run.rng.getrandbits(32)}".encode()
    later = run.rng.choice((0.0, 1.0, 30.0, 70.0))  # the change sent a while after

    async def replace() -> Any:
        await asyncio.sleep(later)
        return await writer.replace(doc_id, replaced, expected_version=1,
                                    content_type="image/png")

    async def delete() -> Any:
        await asyncio.sleep(later)
        return await writer.delete(doc_id)

    if change < 1 / 3:
        racing.append(run.op(f"v{n}.replace", replace))
    elif change < 1 / 2:
        racing.append(run.op(f"v{n}.delete", delete))
    answers = await _gather(racing)
    run.note(f"v{n} {doc_id[:8]} variants: "
             + ", ".join(f"{o} {getattr(v, 'blob', _short(v))}" for o, v in answers))
    made = [v for o, v in answers[:2] if o == "ok"]
    if len({v.blob for v in made}) > 1:
        raise Violation(f"two makers of {VARIANT} of {doc_id} v1 answered two blobs: "
                        f"{sorted(v.blob for v in made)}")
    want = hashlib.sha256(rendered(data, VARIANT)).hexdigest()
    for v in made:
        if v.version != 1 or v.sha256 != want:
            raise Violation(f"{VARIANT} of {doc_id} v1 answered v{v.version} {v.sha256}, the "
                            f"rendering of v1 is {want}")
    if not 1 / 3 <= change < 1 / 2:  # not deleted: its current variant, read again
        await _read_again(run, n, here, doc_id, {data, replaced} if change < 1 / 3 else {data})


async def _read_again(run: _Run, n: int, ledger: Any, doc_id: str, sources: set[bytes]) -> None:
    from tests.sim.sim import Violation, _short

    async def read() -> bytes:
        _, reader = await open_variant(ledger, doc_id, VARIANT)
        try:
            return b"".join([chunk async for chunk in reader])
        finally:
            await reader.aclose()

    outcome, value = await run.op(f"v{n}.read", read)
    run.note(f"v{n} {doc_id[:8]} variant read: {outcome} {_short(value)}")
    if outcome == "ok" and value not in {rendered(s, VARIANT) for s in sources}:
        raise Violation(f"{VARIANT} of {doc_id} read back {value[:40]!r}: not the rendering "
                        "of any version of its document")


async def _gather(ops: list[Any]) -> list[tuple[str, Any]]:
    return list(await asyncio.gather(*ops))
