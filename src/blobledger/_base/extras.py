"""What a backend or the service needs installed beyond the core: the optional extras.

The core install runs the library, the blocking facade, Django's storage and the CLI on
SQLite and local disk. Each other backend and the HTTP service is an extra; a store or
database URL, or ``blobledger serve``, whose extra is missing is refused at once (where the
settings are checked, and again where a store or a database is opened) as one line naming
the extra, never a traceback from deep inside an import.
"""

from __future__ import annotations

import importlib.util

from blobledger.errors import ConfigError

#: store URL scheme -> (the modules it imports, its extra)
STORE_EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "azure": (("azure.storage.blob", "azure.identity", "aiohttp"), "azure"),
    "s3": (("aiobotocore", "botocore"), "s3"),
}
#: what ``blobledger serve`` imports
SERVE_MODULES = ("fastapi", "starlette", "uvicorn", "h11", "python_multipart",
                 "prometheus_client", "http_sfv", "fastapi_offline")
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
