"""Alembic, driven from code: the migrations ship inside the package.

Embedded in an application's database, the ledger keeps its own version table
(:data:`EMBEDDED_VERSION_TABLE`) beside the application's ``alembic_version``. From the
application's own Alembic ``env.py`` (inside its Alembic run, where a second ``alembic``
command would tear down the first one's ``context``), after ``context.run_migrations()``::

    from blobledger.protocol.migrate import upgrade_within
    upgrade_within(connection)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from blobledger.db import EMBEDDED_VERSION_TABLE, Database
from blobledger.protocol.models import SCHEMA, Base

__all__ = ["EMBEDDED_VERSION_TABLE", "MIGRATIONS", "alembic_config", "ensure_schema",
           "migrate_database", "upgrade", "upgrade_within"]

MIGRATIONS = Path(__file__).parent.parent / "migrations"


def alembic_config(connection: Connection | None = None,
                   version_table: str = "alembic_version") -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["version_table"] = version_table
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, revision: str = "head", *,
            version_table: str = "alembic_version") -> None:
    """Upgrade the database behind ``connection`` (a sync connection) to ``revision``,
    recording it in ``version_table``."""
    command.upgrade(alembic_config(connection, version_table), revision)


def ensure_schema(connection: Connection) -> None:
    """Create the ledger's schema (``BLOBLEDGER_DB_SCHEMA``, PostgreSQL) if it is missing."""
    if SCHEMA is not None and connection.dialect.name == "postgresql":
        connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{SCHEMA}"'))


def upgrade_within(connection: Connection, revision: str = "head", *,
                   version_table: str = EMBEDDED_VERSION_TABLE) -> None:
    """The ledger's migrations from inside another Alembic run (an application's ``env.py``),
    on its connection, without an Alembic command of their own; committed with the
    application's migrations (call ``connection.commit()`` if the caller does not)."""
    script = ScriptDirectory.from_config(alembic_config())

    def steps(current: Any, _context: MigrationContext) -> Any:
        return script._upgrade_revs(revision, current)

    ensure_schema(connection)
    context = MigrationContext.configure(connection, opts={
        "version_table": version_table, "fn": steps, "script": script,
        "target_metadata": Base.metadata,
        "render_as_batch": connection.dialect.name == "sqlite"})
    with Operations.context(context), context.begin_transaction():
        context.run_migrations()


async def migrate_database(db: Database) -> None:
    """Apply every Alembic migration to ``db`` (serialised by an advisory lock on PostgreSQL)."""
    await db.ping()
    async with db.engine.begin() as conn:
        if not db.is_sqlite:
            await conn.execute(text("SELECT pg_advisory_xact_lock(7368201)"))
        await conn.run_sync(upgrade, "head", version_table=db.version_table)
