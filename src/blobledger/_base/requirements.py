"""What a setting's feature needs installed: the one place that decides it.

A feature that needs an optional extra or a program on this machine is refused where the
settings are checked (``Settings`` itself: ``serve``, every worker command, ``config``,
``check``, ``doctor``, Django's ``manage.py check``), before anything runs, as one line
naming the setting and the install that fixes it. Nothing may start and find out later:
a background worker that cannot import its module would otherwise die where no one looks.

==============================  ====================================================
setting                         needs
==============================  ====================================================
BLOBLEDGER_PROCESSORS           ``content-type``: puremagic (``blobledger[processors]``);
                                ``scan`` with ``BLOBLEDGER_SCAN_COMMAND``: its program
BLOBLEDGER_VARIANTS             Pillow (``blobledger[images]``)
BLOBLEDGER_OTEL                 OpenTelemetry's API and SDK (``blobledger[otel]``)
==============================  ====================================================

(The ``tus`` extra is a client, tuspy, that no setting of the service uses.)
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Extra:
    """An optional extra: the modules it brings, and the setting that uses them."""

    setting: str
    what: str
    modules: tuple[str, ...]
    extra: str

    def problem(self) -> str | None:
        if all(_importable(module) for module in self.modules):
            return None
        return f"{self.setting} needs {self.what}: pip install 'blobledger[{self.extra}]'"


CONTENT_TYPE = Extra("BLOBLEDGER_PROCESSORS=content-type", "puremagic", ("puremagic",),
                     "processors")
IMAGES = Extra("BLOBLEDGER_VARIANTS", "Pillow", ("PIL",), "images")
OTEL = Extra("BLOBLEDGER_OTEL", "OpenTelemetry",
             ("opentelemetry.trace", "opentelemetry.sdk.trace",
              "opentelemetry.instrumentation.sqlalchemy"), "otel")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or half-imported
        return False


def scan_program_problem(command: str) -> str | None:
    """Why ``BLOBLEDGER_SCAN_COMMAND`` cannot run here (None if its program is found)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"BLOBLEDGER_SCAN_COMMAND is not a command line: {exc}"
    if not argv:
        return "BLOBLEDGER_SCAN_COMMAND is empty"
    if shutil.which(argv[0]) is None:
        return (f"BLOBLEDGER_SCAN_COMMAND: {argv[0]!r} is not an executable program on "
                "this machine (install the scanner, or name it by its full path)")
    return None


def unmet(settings: Any) -> list[str]:
    """One line per feature the settings turn on that cannot run on this machine (empty:
    everything they ask for is installed). ``settings``: a :class:`blobledger.config.Settings`
    (or anything with its fields)."""
    problems: list[str | None] = []
    if "content-type" in settings.processors:
        problems.append(CONTENT_TYPE.problem())
    if "scan" in settings.processors and settings.scan_command:
        problems.append(scan_program_problem(settings.scan_command))
    if settings.variants:
        problems.append(IMAGES.problem())
    if settings.otel:
        problems.append(OTEL.problem())
    return [problem for problem in problems if problem]
