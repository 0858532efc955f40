"""The pipeline (docs/pipeline.md): which creations are held, the processors a held
document waits for, the external scanner, and the workers' claims on held work."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator

from blobledger._base.hosts import split_list
from blobledger.config.fields import Count, Duration, positive, setting

#: the processors that ship (``BLOBLEDGER_PROCESSORS``), in the order they are listed
PROCESSORS = ("content-type", "scan")


def _processors(value: object) -> object:
    names = tuple(dict.fromkeys(split_list(value)))
    unknown = [name for name in names if name not in PROCESSORS]
    if unknown:
        raise ValueError(f"unknown processor {unknown[0]!r} (known: {', '.join(PROCESSORS)})")
    return names


def _prefixes(value: object) -> object:
    return tuple(dict.fromkeys(split_list(value)))


Processors = Annotated[tuple[str, ...], BeforeValidator(_processors)]
Prefixes = Annotated[tuple[str, ...], BeforeValidator(_prefixes)]


class PipelineSettings(BaseModel):
    """Held documents and the processors that accept or reject them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: which creations are held until every processor accepted them: ``asked`` (those
    #: whose writer asks), ``always`` (every one); and those under ``hold_prefixes``
    hold: Literal["asked", "always"] = setting(
        "asked", "`asked`: a creation is held when its writer asks; `always`: every creation")
    hold_prefixes: Prefixes = setting(
        (), "creations whose name starts with one of these are held", "none")
    #: the processors a held document waits for (docs/pipeline.md)
    processors: Processors = setting(
        (), "the processors a held document waits for: `content-type`, `scan`", "none")
    #: the external scanner: a command (argv, shell-quoted; ``{path}`` for a temporary file,
    #: else the bytes on stdin) or an HTTP endpoint the bytes are POSTed to
    scan_command: str | None = setting(
        None, "the `scan` processor's command (argv, shell-quoted, run without a shell)")
    scan_url: str | None = setting(None, "or its HTTP endpoint")
    scan_timeout: Duration = setting(60.0, "one scan may take this long (then it failed)")
    #: how long a worker's claim on held work lasts (must exceed the scan's timeout)
    processing_lease: Duration = setting(
        600.0, "a worker's claim on a piece of work (more than the scan timeout)")
    #: failed runs of one processor (errors, timeouts) before the document is rejected
    processing_attempts: Count = setting(
        5, "failed runs of one processor before the document is rejected")
    #: how often ``serve`` looks for held work (when processors are configured)
    processing_interval: Duration = setting(2.0, "how often `serve` looks for held work")

    @field_validator("scan_timeout", "processing_lease", "processing_attempts",
                     "processing_interval")
    @classmethod
    def _pipeline_positive(cls, value: float) -> float:
        return positive(value)


def held_by_settings(settings: PipelineSettings, name: str) -> bool:
    """Whether the settings hold a creation of this name (``hold`` always, or the name under
    one of ``hold_prefixes``), whatever its writer asked."""
    return settings.hold == "always" or any(name.startswith(p) for p in settings.hold_prefixes)
