"""``blobledger migrate``: apply the database migrations, and set up the store as ``serve``
would (a local store's folder, a container)."""

from __future__ import annotations

import click

from blobledger.cli import run_async, settings
from blobledger.db import Database
from blobledger.protocol.migrate import migrate_database
from blobledger.stores import open_store


@click.command(epilog="\b\nExamples:\n  blobledger migrate\n"
               "  blobledger migrate --database-url postgresql://app@db/blobledger")
@click.option("--database-url", help="overrides BLOBLEDGER_DATABASE_URL")
@run_async
async def command(database_url: str | None) -> int:
    """Apply every database migration (BLOBLEDGER_DATABASE_URL); with the service's own
    database, also create its store (BLOBLEDGER_STORE_URL) if missing, as `serve` does, so
    that the workers and queries, which create nothing, find both."""
    current = settings()
    db = Database(database_url or current.database_url)
    if current.version_table:  # embedded in an application's database
        db.version_table = current.version_table
    try:
        await migrate_database(db)
    finally:
        await db.dispose()
    if database_url is None:
        async with open_store(current.store_url, current) as store:
            await store.prepare()
    print("migrations applied")
    return 0
