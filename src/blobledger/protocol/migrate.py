"""Alembic, driven from code: the migrations ship inside the package.

Embedded in an application's database, the ledger keeps its own version table
(:data:`EMBEDDED_VERSION_TABLE`) beside the application's ``alembic_version``. From the
application's own Alembic ``env.py`` (inside its Alembic run, where a second ``alembic``
command would tear down the first one's ``context``), after ``context.run_migrations()``::

    from blobledger.protocol.migrate import upgrade_within
    upgrade_within(connection)

A database already at the newest revision (every ledger's opening but the first) is told so
by one query of its version table, against the newest revision read from the migrations'
files (:func:`head_revision`); Alembic is imported and run only when there is something to
do (its import and its run are a fifth of a command's start-up).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from blobledger.db import EMBEDDED_VERSION_TABLE, Database
from blobledger.protocol.models import SCHEMA, Base

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["EMBEDDED_VERSION_TABLE", "MIGRATIONS", "alembic_config", "ensure_schema",
           "migrate_database", "upgrade", "upgrade_within"]

MIGRATIONS = Path(__file__).parent.parent / "migrations"
_REVISION = re.compile(r"""^revision = ["']([^"']+)["']""", re.MULTILINE)
_DOWN_REVISION = re.compile(r"""^down_revision = (?:["']([^"']+)["']|None)\s*$""", re.MULTILINE)


@functools.cache
def head_revision() -> str | None:
    """The newest revision of the migrations shipped, read from their files' ``revision``
    and ``down_revision`` lines (one straight line of them); None when they do not read as
    one line with one head (then Alembic decides)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision, down = _REVISION.findall(source), _DOWN_REVISION.findall(source)
        if len(revision) != 1 or len(down) != 1 or revision[0] in revisions:
            return None
        revisions.add(revision[0])
        if down[0]:
            parents.add(down[0])
    heads = revisions - parents
    if len(heads) != 1 or not parents <= revisions or len(parents) != len(revisions) - 1:
        return None
    return heads.pop()


def alembic_config(connection: Connection | None = None,
                   version_table: str = "alembic_version") -> Config:
    from alembic.config import Config

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
    from alembic import command

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
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

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


async def at_head(db: Database) -> bool:
    """Whether ``db``'s version table holds the newest revision, and only it (a table that
    is not there, or any failure to read it: no)."""
    head = head_revision()
    if head is None:
        return False
    try:
        async with db.transaction(readonly=True) as conn:
            rows = (await conn.execute(
                text(f'SELECT version_num FROM "{db.version_table}"'))).scalars().all()
    except SQLAlchemyError:
        return False
    return list(rows) == [head]


async def migrate_database(db: Database) -> None:
    """Apply every Alembic migration to ``db`` (serialised by an advisory lock on PostgreSQL);
    nothing when its version table already holds the newest revision."""
    await db.ping()
    if await at_head(db):
        return
    async with db.engine.begin() as conn:
        if not db.is_sqlite:
            await conn.execute(text("SELECT pg_advisory_xact_lock(7368201)"))
        await conn.run_sync(upgrade, "head", version_table=db.version_table)
