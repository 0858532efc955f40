"""Derived images (``GET /documents/{id}/variants/{name}``; docs/pipeline.md): which are
made, in what format, from how large a source, and how long a maker's claim lasts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, field_validator

from blobledger._base.variant_specs import VariantSpec, parse_variants
from blobledger.config.fields import Count, Duration, Size, positive, setting
from blobledger.errors import ConfigError


def _variants(value: object) -> object:
    if isinstance(value, str):
        try:
            return parse_variants(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


Variants = Annotated[dict[str, VariantSpec], BeforeValidator(_variants), PlainSerializer(
    lambda specs: ",".join(str(spec) for spec in specs.values()), when_used="json")]


class VariantSettings(BaseModel):
    """The variants and the limits of their sources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: derived images (``GET /documents/{id}/variants/{name}``), by name; none by default
    variants: Variants = setting(
        {}, "derived images, `thumb=256x256,medium=1024x1024`, served at "
        "`/documents/{id}/variants/{name}` (needs `pip install 'blobledger[images]'`; "
        "docs/pipeline.md)", "unset: none")
    variant_format: Literal["webp", "jpeg", "png"] = setting(
        "webp", "the variants' format (`webp`, `jpeg`, `png`)")
    variant_quality: Count = setting(80, "the variants' lossy quality (1-100)")
    #: a source image with more pixels than this is refused (a decompression bomb)
    max_image_pixels: Count = setting(
        64_000_000, "a source image with more pixels gets no variant (422 `image-too-large`)")
    #: a source image larger than this (bytes) is refused before it is read
    max_image_bytes: Size = setting(
        64 * 1024**2, "a source image with more bytes gets no variant (422 "
        "`image-too-large`), refused before it is read")
    #: how long a variant maker's claim lasts; a request waiting for it takes over after
    variant_lease: Duration = setting(
        60.0, "how long a variant maker's claim lasts; a request waiting for it takes it "
        "over after")

    @field_validator("max_image_pixels", "max_image_bytes", "variant_lease")
    @classmethod
    def _variants_positive(cls, value: float) -> float:
        return positive(value)

    @field_validator("variant_quality")
    @classmethod
    def _quality(cls, value: int) -> int:
        if not 1 <= value <= 100:
            raise ValueError("must be 1 to 100")
        return value
