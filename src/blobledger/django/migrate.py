"""The ledger's migrations for a Django database (the app's migration and
``blobledger_doctor`` use them)."""

from __future__ import annotations

from blobledger.db import Database
from blobledger.django.conf import database_url, ledger_settings, run
from blobledger.protocol.migrate import migrate_database


def upgrade_alias(alias: str) -> None:
    """Upgrade the ledger's tables in the Django database ``alias`` to the newest revision
    (under the PostgreSQL advisory lock every ledger migration takes)."""
    settings = ledger_settings(alias, {"database_url": database_url(alias)})

    async def upgrade() -> None:
        db = Database(settings.database_url)
        db.version_table = settings.version_table or db.version_table
        try:
            await migrate_database(db)
        finally:
            await db.dispose()

    run(upgrade())
