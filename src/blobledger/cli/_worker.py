"""What the worker commands (sweep, reconcile) share: a ledger whose database and store
answer before any work starts, and database failures told in one line; and what the
commands that only inspect (check, doctor) share: a database or a store that does not exist
is a configuration error that says where to point them (:func:`nothing_created`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from sqlalchemy.exc import SQLAlchemyError

from blobledger.cli import settings
from blobledger.errors import ConfigError, DatabaseMissing, StoreMissing, StoreUnavailable
from blobledger.protocol.ledger import Ledger

#: how long the store may take to answer before a worker gives up (its SDK retries inside)
PING_TIMEOUT = 10.0


@asynccontextmanager
async def worker_ledger() -> AsyncIterator[Ledger]:
    """A ledger from the settings, checked: the database answers and is migrated, the
    store answers. Nothing is created (a SQLite file, its ``.sweep-lock``, a local store's
    folder: one that does not exist is a ConfigError naming the URL looked at and the
    setting), nothing is deleted before both checks pass."""
    with nothing_created("a worker or a query"):
        ledger = Ledger.from_settings(settings(), migrate=False, create=False)
    try:
        await ledger.db.ping()
        try:
            async with asyncio.timeout(PING_TIMEOUT):
                await ledger.store.ping()
        except TimeoutError:
            raise StoreUnavailable(f"store {ledger.store.url} unreachable: no answer within "
                                   f"{PING_TIMEOUT:g}s") from None
        yield ledger
    except (DatabaseMissing, StoreMissing) as exc:
        raise ConfigError(f"{exc} (a worker or a query creates nothing; the settings come "
                          "from the environment, .env or --config)") from None
    except SQLAlchemyError as exc:
        lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        raise StoreUnavailable(f"database error: {lines[0] if lines else type(exc).__name__}"
                               " (is it migrated? run `blobledger migrate`)") from exc
    finally:
        await ledger.close()


@contextmanager
def nothing_created(command: str) -> Iterator[None]:
    """For a command that inspects the service's database and store and creates neither: one
    that does not exist (a SQLite file, a local store's folder, a PostgreSQL database) is a
    ConfigError (exit 2) naming the URL looked at and the setting that points elsewhere."""
    try:
        yield
    except (DatabaseMissing, StoreMissing) as exc:
        raise ConfigError(f"{exc} ({command} creates nothing; the settings come from the "
                          "environment, .env or --config)") from None
