"""Alembic, driven from code: the migrations ship inside the package.

Embedded in an application's database, the ledger keeps its own version table
(:data:`EMBEDDED_VERSION_TABLE`) beside the application's ``alembic_version``; from the
application's own Alembic ``env.py``, after ``context.run_migrations()``::

    from blobledger.migrate import EMBEDDED_VERSION_TABLE, upgrade
    upgrade(connection, version_table=EMBEDDED_VERSION_TABLE)
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from blobledger.db import EMBEDDED_VERSION_TABLE

__all__ = ["EMBEDDED_VERSION_TABLE", "MIGRATIONS", "alembic_config", "upgrade"]

MIGRATIONS = Path(__file__).with_name("migrations")


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
