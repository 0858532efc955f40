"""blobledger's settings from Django's: ``settings.BLOBLEDGER``, ``BLOBLEDGER_*``, a storage's
``OPTIONS``, and the database of a Django alias.

Highest priority first: the storage's ``OPTIONS`` (``{"store_url": ...}``), the dict
``settings.BLOBLEDGER`` (keys in any case: ``{"STORE_URL": ..., "SWEEP_AFTER": "2h"}``),
the settings ``BLOBLEDGER_<NAME>`` of ``settings.py``, then the process environment, over
blobledger's defaults. The database is always the Django alias's own (the ledger's rows
must commit with the application's), unless ``DATABASE_URL`` is given explicitly.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.db import connections
from sqlalchemy.engine import URL

from blobledger import failpoints
from blobledger.blocking import BlockingLedger
from blobledger.config import ENV_PREFIX, Settings, environment_with, load_settings
from blobledger.db import EMBEDDED_VERSION_TABLE
from blobledger.errors import ConfigError
from blobledger.protocol.ledger import Ledger

T = TypeVar("T")

_DRIVERS = {"sqlite": "sqlite", "postgresql": "postgresql"}


def database_url(alias: str = "default") -> str:
    """The URL of a Django database (its test database while tests run), for SQLAlchemy."""
    connection = connections[alias]
    vendor = connection.vendor
    if vendor not in _DRIVERS:
        raise ConfigError(f"database {alias!r} is {vendor}: blobledger runs on PostgreSQL "
                          "and SQLite")
    params = connection.settings_dict
    name = str(params["NAME"])
    if vendor == "sqlite":
        if name == ":memory:" or name.startswith("file:"):
            raise ConfigError(f"database {alias!r}: blobledger needs SQLite in a file (the "
                              "ledger opens its own connections); set NAME and TEST NAME "
                              "to file paths")
        return f"sqlite:///{name}"
    port = str(params.get("PORT") or "")
    url = URL.create("postgresql", username=params.get("USER") or None,
                     password=params.get("PASSWORD") or None,
                     host=params.get("HOST") or None,
                     port=int(port) if port else None, database=name)
    return url.render_as_string(hide_password=False)


def _django_values() -> tuple[dict[str, str], dict[str, Any]]:
    """(``BLOBLEDGER_*`` settings as environment values, the ``BLOBLEDGER`` dict)."""
    env = {name: str(getattr(django_settings, name)) for name in dir(django_settings)
           if name.startswith(ENV_PREFIX)}
    block = getattr(django_settings, "BLOBLEDGER", None) or {}
    if not isinstance(block, Mapping):
        raise ConfigError("settings.BLOBLEDGER must be a dict")
    return env, {str(key).lower(): value for key, value in block.items()}


def ledger_settings(alias: str = "default",
                    options: Mapping[str, Any] | None = None) -> Settings:
    """blobledger's settings for the database ``alias`` (see the module's docstring)."""
    env, block = _django_values()
    overrides = {**block, **{str(k).lower(): v for k, v in (options or {}).items()}}
    overrides.setdefault("database_url", database_url(alias))
    overrides.setdefault("version_table", EMBEDDED_VERSION_TABLE)
    return load_settings(environment_with(env), env_file=None, overrides=overrides)


# -- one blocking ledger per database and settings, per process --------------------------
_ledgers: dict[str, BlockingLedger] = {}
_lock = threading.Lock()


def blocking_ledger(settings: Settings) -> BlockingLedger:
    """The process's connected ledger for these settings (built on first use)."""
    key = settings.model_dump_json()
    with _lock:
        found = _ledgers.get(key)
        if found is None:
            found = BlockingLedger(Ledger.from_settings(settings, migrate=False))
            _ledgers[key] = found
        return found


def close_ledgers() -> None:
    """Close every ledger this process opened (they reopen on next use)."""
    with _lock:
        ledgers = list(_ledgers.values())
        _ledgers.clear()
    for ledger in ledgers:
        ledger.close()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """A coroutine run to completion from Django's sync code, on a thread of its own (so it
    works under a running event loop too)."""
    result: list[T] = []
    failure: list[BaseException] = []

    def main() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=main, name="blobledger-run")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def failpoint(point: str) -> None:
    """A failpoint passed by Django's sync code (on a loop of its own, so that a hook that
    holds it never blocks the ledger's loop)."""
    if failpoints.armed():
        run(failpoints.hit(point))
