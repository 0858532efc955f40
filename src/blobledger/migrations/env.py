"""Alembic environment: runs on the connection handed in by ``blobledger.protocol.migrate``."""

from __future__ import annotations

from alembic import context

from blobledger.protocol.migrate import ensure_schema
from blobledger.protocol.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `blobledger migrate`")
ensure_schema(connection)
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    version_table=context.config.attributes.get("version_table", "alembic_version"),
)
with context.begin_transaction():
    context.run_migrations()
