"""The docs' table of settings, written from the models (``blobledger config --table``,
``scripts/settings-table``): each field's variable, its meaning (the field's description)
and its default, area by area. The README holds every area's table and docs/pipeline.md
the pipeline's, each between ``<!-- settings-table[: area] -->`` and
``<!-- /settings-table -->``; a test fails when one differs from what is written here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from blobledger._base.durations import format_duration
from blobledger.config.backends import StoreLimits
from blobledger.config.client import ClientSettings, DiagnosticSettings
from blobledger.config.embedded import EmbeddedSettings
from blobledger.config.fields import Duration, Size
from blobledger.config.naming import NESTED, env_name
from blobledger.config.pipeline import PipelineSettings
from blobledger.config.protocol import ProtocolSettings
from blobledger.config.s3api import S3ApiSettings
from blobledger.config.service import ServiceSettings
from blobledger.config.settings import Settings
from blobledger.config.storage import StorageSettings
from blobledger.config.variants import VariantSettings
from blobledger.config.workers import WorkerSettings


@dataclass(frozen=True)
class Area:
    name: str  # as ``--area`` and a docs marker name it
    title: str
    model: type[BaseModel]


#: the areas of :class:`~blobledger.config.Settings`, in the docs' order
AREAS = (
    Area("storage", "Storage: the database, the store and its backends", StorageSettings),
    Area("embedded", "The ledger in an application's database", EmbeddedSettings),
    Area("protocol", "The protocol's limits and timings", ProtocolSettings),
    Area("service", "The HTTP service", ServiceSettings),
    Area("s3api", "The S3-compatible endpoint (docs/s3.md)", S3ApiSettings),
    Area("workers", "The background workers and the events' delivery", WorkerSettings),
    Area("pipeline", "Held documents and processors (docs/pipeline.md)", PipelineSettings),
    Area("variants", "Derived images", VariantSettings),
    Area("client", "The client commands", ClientSettings),
    Area("diagnostics", "Telemetry and test hooks", DiagnosticSettings),
)
BEGIN = re.compile(r"^<!-- settings-table(?::\s*(?P<area>[a-z0-9]+))? -->$", re.MULTILINE)
END = "<!-- /settings-table -->"


def _of_kind(info: FieldInfo, kind: object) -> bool:
    """The field holds a ``kind`` (:data:`~blobledger.config.fields.Duration`, …), or None."""
    metadata = [*info.metadata, *(item for arg in get_args(info.annotation)
                                  for item in getattr(arg, "__metadata__", ()))]
    return all(item in metadata for item in getattr(kind, "__metadata__", ()))


def _size(value: int) -> str:
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value and value % factor == 0:
            return f"{value // factor}{unit}"
    return str(value)


def shown_default(info: FieldInfo) -> str:
    """How the docs show a field's default."""
    extra = info.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown"), str):
        return str(extra["shown"])
    value = info.default
    if value is None or value in ("", (), {}):
        return "unset"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif _of_kind(info, Duration) and isinstance(value, int | float):
        text = format_duration(value)
    elif _of_kind(info, Size) and isinstance(value, int):
        text = _size(value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    else:
        text = str(value)
    return f"`{text}`"


def _row(names: list[str], info: FieldInfo) -> str:
    variables = ", ".join(f"`{name}`" for name in names)
    meaning = " ".join((info.description or "").split()).replace("|", "\\|")
    return f"| {variables} | {meaning} | {shown_default(info)} |"


def _rows(model: type[BaseModel]) -> Iterator[str]:
    shared: list[str] = []  # the remote stores' common fields: one row, every backend
    for name, info in model.model_fields.items():
        nested = info.annotation
        if name in NESTED and isinstance(nested, type) and issubclass(nested, BaseModel):
            for inner, inner_info in nested.model_fields.items():
                if inner not in StoreLimits.model_fields:
                    yield _row([env_name((name, inner))], inner_info)
            shared.append(name)
            if len(shared) == len(NESTED):
                for inner, inner_info in StoreLimits.model_fields.items():
                    yield _row([env_name((backend, inner)) for backend in shared], inner_info)
            continue
        yield _row([env_name((name,))], info)


def render(area: str | None = None) -> str:
    """The markdown table of one area's settings, or (None) every area's, each under its
    title."""
    chosen = [a for a in AREAS if area in (None, a.name)]
    if not chosen:
        known = ", ".join(a.name for a in AREAS)
        raise ValueError(f"unknown area {area!r} (known: {known})")
    parts = []
    for each in chosen:
        table = ["| variable | meaning | default |", "| --- | --- | --- |", *_rows(each.model)]
        parts.append("\n".join(table) if area else f"**{each.title}**\n\n" + "\n".join(table))
    return "\n\n".join(parts) + "\n"


def refresh(text: str) -> str:
    """``text`` (a markdown document) with every settings table between its markers written
    anew from the models."""
    out, position = [], 0
    for begin in BEGIN.finditer(text):
        if begin.start() < position:
            continue
        end = text.find(END, begin.end())
        if end < 0:
            raise ValueError(f"{begin.group(0)} is not closed by {END}")
        out += [text[position:begin.end()], "\n\n", render(begin.group("area")), "\n"]
        position = end
    return "".join(out) + text[position:]


def unplaced() -> set[str]:
    """The settings no area shows (none: every field of Settings is in a table)."""
    placed = {name for area in AREAS for name in area.model.model_fields}
    return set(Settings.model_fields) - placed
