"""What the settings need installed beyond the core: the one place that decides it.

The core install runs the library, the blocking facade, Django's storage and the CLI on
SQLite and local disk. Each other backend and the HTTP service is an extra; a store or
database URL, or ``blobledger serve``, whose extra is missing is refused at once (where the
settings are checked, and again where a store or a database is opened) as one line naming
the extra, never a traceback from deep inside an import.

A feature that needs an optional extra or a program on this machine is refused the same way
where the settings are checked (``Settings`` itself: ``serve``, every worker command,
``config``, ``check``, ``doctor``, Django's ``manage.py check``), before anything runs: a
background worker that cannot import its module would otherwise die where no one looks.

==============================  ====================================================
setting                         needs
==============================  ====================================================
BLOBLEDGER_STORE_URL            ``azure://``: ``blobledger[azure]``; ``s3://``: ``[s3]``
BLOBLEDGER_DATABASE_URL         ``postgresql://``: ``blobledger[postgresql]``
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

from blobledger.errors import ConfigError

#: store URL scheme -> (the modules it imports, its extra)
STORE_EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "azure": (("azure.storage.blob", "azure.identity", "aiohttp"), "azure"),
    "s3": (("aiobotocore", "botocore"), "s3"),
}
#: what ``blobledger serve`` imports
SERVE_MODULES = ("fastapi", "starlette", "uvicorn", "h11", "python_multipart",
                 "prometheus_client", "http_sfv", "fastapi_offline", "botocore", "defusedxml")
#: the PostgreSQL driver (the database layer, below this one, checks it itself: db.py)
POSTGRESQL_MODULES = ("asyncpg",)


def importable(module: str) -> bool:
    """``module`` can be imported here (nothing is imported to find out)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or half-imported
        return False


def problem(modules: tuple[str, ...], extra: str, what: str) -> str | None:
    """The one line that names the extra ``what`` needs, if one of ``modules`` is missing."""
    if all(importable(module) for module in modules):
        return None
    return f"{what} needs the {extra} extra: pip install 'blobledger[{extra}]'"


def require(modules: tuple[str, ...], extra: str, what: str) -> None:
    """ConfigError, as :func:`problem`'s line, unless all of ``modules`` are installed."""
    line = problem(modules, extra, what)
    if line is not None:
        raise ConfigError(line)


def store_problem(url: str) -> str | None:
    """The extra a store URL's backend needs, if it is not installed (None: the local
    store, an unknown scheme, which the store URL's own check refuses, or installed)."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme not in STORE_EXTRAS:
        return None
    modules, extra = STORE_EXTRAS[scheme]
    return problem(modules, extra, f"{scheme}://")


def database_problem(url: str) -> str | None:
    """The extra a database URL's driver needs, if it is not installed."""
    scheme = url.partition(":")[0].lower()
    if scheme.partition("+")[0] not in ("postgresql", "postgres"):
        return None
    return problem(POSTGRESQL_MODULES, "postgresql", "a postgresql:// database")


# -- what a feature's setting needs ---------------------------------------------------
@dataclass(frozen=True)
class Extra:
    """An optional extra: the modules it brings, and the setting that uses them."""

    setting: str
    what: str
    modules: tuple[str, ...]
    extra: str

    def problem(self) -> str | None:
        if all(importable(module) for module in self.modules):
            return None
        return f"{self.setting} needs {self.what}: pip install 'blobledger[{self.extra}]'"


CONTENT_TYPE = Extra("BLOBLEDGER_PROCESSORS=content-type", "puremagic", ("puremagic",),
                     "processors")
IMAGES = Extra("BLOBLEDGER_VARIANTS", "Pillow", ("PIL",), "images")
OTEL = Extra("BLOBLEDGER_OTEL", "OpenTelemetry",
             ("opentelemetry.trace", "opentelemetry.sdk.trace",
              "opentelemetry.instrumentation.sqlalchemy"), "otel")


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
