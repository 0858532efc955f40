"""Derived files: image variants (thumbnails, resizes) of a document's version.

Configured by ``BLOBLEDGER_VARIANTS`` (``thumb=256x256,medium=1024x1024``), made with Pillow
(the ``images`` extra), stored as blobs owned by the document's version on the protocol
(staged, then attached in one transaction; detached with their version by R4 and the
delete), served at ``GET /documents/{id}/variants/{name}``. :func:`make_variants` is the
eager path (a processor, ``blobledger variants make``); :func:`make_variant` and
:func:`open_variant` the lazy one. docs/pipeline.md, "Variants".
"""

from blobledger.variants.errors import ImageRefused, UnknownVariant, VariantBusy, VersionEnded
from blobledger.variants.maker import (
    Variant,
    is_image,
    make_variant,
    make_variants,
    open_variant,
    spec_of,
)

__all__ = ["ImageRefused", "UnknownVariant", "Variant", "VariantBusy", "VersionEnded",
           "is_image", "make_variant", "make_variants", "open_variant", "spec_of"]
