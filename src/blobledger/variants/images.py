"""Rendering one variant with Pillow: bytes in, bytes out, nothing stored.

The rules (docs/pipeline.md, "Variants"):

- the source is decoded only if its header says it has at most ``max_image_pixels`` pixels
  (and within Pillow's own ``Image.MAX_IMAGE_PIXELS``: its ``DecompressionBombWarning`` and
  ``DecompressionBombError`` are refusals too), so a small file that would decode to
  gigabytes is refused before any pixel is allocated;
- only :data:`DECODERS` may read it (never Ghostscript's EPS and PostScript);
- it is shrunk to fit the variant's box once oriented, keeping its aspect ratio and never
  enlarging it (Lanczos), and only then turned by its EXIF orientation (no second full-size
  copy); an animated source gives its first frame;
- the output is WebP by default (quality ``variant_quality``; transparency kept), or JPEG
  (transparency flattened onto white) or PNG (lossless; quality unused); metadata other
  than the colour profile is dropped (EXIF can carry a location).

``open_source`` reads the header (cheap, on the caller's thread); ``render`` decodes and
encodes (CPU-bound: run it in a worker thread).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

from PIL import ExifTags, Image, ImageOps, UnidentifiedImageError

from blobledger._base.variant_specs import FORMATS, VariantSpec
from blobledger.variants.errors import ImageRefused

#: the encoders' names in Pillow
_PIL_FORMAT = {"webp": "WEBP", "jpeg": "JPEG", "png": "PNG"}
#: the only decoders a source may use: raster formats Pillow decodes itself (never EPS or
#: PostScript, which it hands to Ghostscript, nor its rarer plugins)
DECODERS = ("JPEG", "PNG", "GIF", "WEBP", "TIFF", "BMP")
#: EXIF orientations that swap the width and the height
_SWAPS = frozenset({5, 6, 7, 8})


@dataclass(frozen=True)
class Rendered:
    """A rendered variant: its bytes, media type and pixel size."""

    data: bytes
    content_type: str
    width: int
    height: int


def open_source(data: bytes, max_pixels: int) -> Image.Image:
    """The source image with only its header read. ImageRefused: 415 when none of
    :data:`DECODERS` knows the bytes, 422 when it has more pixels than allowed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=DECODERS)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise _too_many("more pixels than Pillow's limit") from None
    except UnidentifiedImageError:
        raise ImageRefused("the document is not an image format this service can read",
                           status=415, kind="unsupported-image") from None
    except (OSError, ValueError, SyntaxError) as exc:  # a header that does not parse
        raise _unreadable(exc) from None
    width, height = image.size
    if width * height > max_pixels:
        image.close()
        raise _too_many(f"{width}x{height} pixels, more than {max_pixels}")
    return image


def render(image: Image.Image, spec: VariantSpec, fmt: str, quality: int) -> Rendered:
    """Decode, orient, shrink and encode (closes ``image``). ImageRefused (422) if the
    pixels do not decode."""
    try:
        with image:
            # the orientation first (a PNG's EXIF may follow its pixels: that decodes it);
            # then shrink, and only then turn the few pixels left: never a second full copy
            turned = image.getexif().get(ExifTags.Base.Orientation) in _SWAPS
            box = (spec.height, spec.width) if turned else (spec.width, spec.height)
            image.draft("RGB", box)  # JPEG: decode at a reduced scale if it still fits
            image.thumbnail(box, Image.Resampling.LANCZOS)  # reduce(), then Lanczos
            oriented = ImageOps.exif_transpose(image)
            out = _mode_for(oriented, fmt)
            buffer = io.BytesIO()
            options: dict[str, object] = {}
            if fmt in ("webp", "jpeg"):
                options["quality"] = quality
            if icc := image.info.get("icc_profile"):
                options["icc_profile"] = icc
            out.save(buffer, _PIL_FORMAT[fmt], **options)
    except ImageRefused:
        raise
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise _unreadable(exc) from None
    return Rendered(buffer.getvalue(), FORMATS[fmt], out.width, out.height)


def _mode_for(image: Image.Image, fmt: str) -> Image.Image:
    """The image in a mode the output format stores: RGB, or RGBA where transparency can be
    kept (WebP, PNG); JPEG flattens transparency onto white."""
    alpha = image.mode in ("RGBA", "LA", "PA") or (
        image.mode == "P" and "transparency" in image.info)
    if not alpha:
        return image if image.mode == "RGB" else image.convert("RGB")
    rgba = image if image.mode == "RGBA" else image.convert("RGBA")
    if fmt != "jpeg":
        return rgba
    flat = Image.new("RGB", rgba.size, (255, 255, 255))
    flat.paste(rgba, mask=rgba.getchannel("A"))
    return flat


def _too_many(detail: str) -> ImageRefused:
    return ImageRefused(f"the image is too large to make variants of ({detail})",
                        status=422, kind="image-too-large")


def _unreadable(exc: BaseException) -> ImageRefused:
    return ImageRefused(f"the image does not decode ({type(exc).__name__})",
                        status=422, kind="invalid-image")
