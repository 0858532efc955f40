"""``blobledger variants make``: the eager path of derived images, from the command line.

Makes (or finds made) the configured variants (``BLOBLEDGER_VARIANTS``) of the documents
named, or of every ready image with ``--all``, on the configured database and store, by
:func:`blobledger.variants.make_variants`, the function a processing worker calls. One line
per variant: the document's id, its version, the variant's name, size and blob. A document
whose image is refused (too many pixels or bytes, a format Pillow cannot read) is reported
on stderr and the others go on; the exit status is then 1.
"""

from __future__ import annotations

import json

import click

from blobledger.cli import EXIT_ERROR, EXIT_USAGE, fail, run_async
from blobledger.cli._worker import worker_ledger
from blobledger.errors import NotFound
from blobledger.variants import ImageRefused, Variant, is_image, make_variants

command = click.Group("variants", help="Derived images (thumbnails, resizes) of documents.",
                      epilog="\b\nExamples:\n  blobledger variants make --all")


@command.command("make", epilog="\b\nExamples:\n  blobledger variants make 3f2a...e9\n"
                 "  blobledger variants make --all --name thumb")
@click.argument("doc_ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="every ready document that is an image")
@click.option("--name", "names", multiple=True,
              help="only this variant (repeatable); default: every configured one")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
@run_async
async def make(doc_ids: tuple[str, ...], every: bool, names: tuple[str, ...],
               as_json: bool) -> int:
    """Make the variants of DOC_IDS (or of every image, --all) now."""
    if bool(doc_ids) == every:
        return fail("name documents by id, or give --all (not both)", EXIT_USAGE)
    async with worker_ledger() as ledger:
        configured = ledger.settings.variants
        if not configured:
            return fail("no variants are configured: set BLOBLEDGER_VARIANTS "
                        "(e.g. thumb=256x256)", EXIT_USAGE)
        unknown = [name for name in names if name not in configured]
        if unknown:
            return fail(f"no variant {unknown[0]!r} (configured: "
                        f"{', '.join(sorted(configured))})", EXIT_USAGE)
        ids = list(doc_ids) or [doc.id async for doc in ledger.list()
                                if is_image(doc.content_type)]
        failed = 0
        for doc_id in ids:
            try:
                made = await make_variants(ledger, doc_id, names=list(names) or None)
            except (ImageRefused, NotFound) as exc:
                failed += 1
                fail(f"{doc_id}: {exc}")
                continue
            for variant in made:
                _print(variant, as_json)
    return EXIT_ERROR if failed else 0


def _print(variant: Variant, as_json: bool) -> None:
    if as_json:
        print(json.dumps(variant.to_json()))
    else:
        print(f"{variant.document_id}\tv{variant.version}\t{variant.name}\t"
              f"{variant.size}\t{variant.blob}")
