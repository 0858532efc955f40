"""The documented recipe: the ledger's migrations run from the application's own Alembic
``env.py``, after the application's, each recorded in its own version table."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from blobledger.db import EMBEDDED_VERSION_TABLE
from tests.attachments.conftest import app_url
from tests.support.services import create_database, drop_database

ENV_PY = '''
from alembic import context
from sqlalchemy import create_engine

from blobledger.protocol.migrate import upgrade_within

engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=None)
    with context.begin_transaction():
        context.run_migrations()
    upgrade_within(connection)  # the ledger's migrations, after ours
    connection.commit()
engine.dispose()
'''

APP_0001 = '''
import sqlalchemy as sa
from alembic import op

revision = "app_0001"
down_revision = None


def upgrade() -> None:
    op.create_table("invoices", sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("pdf", sa.Text))
'''


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_from_the_applications_env_py(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else await create_database()
    try:
        (tmp_path / "migrations" / "versions").mkdir(parents=True)
        (tmp_path / "migrations" / "env.py").write_text(ENV_PY)
        (tmp_path / "migrations" / "versions" / "app_0001.py").write_text(APP_0001)
        config = Config()
        config.set_main_option("script_location", str(tmp_path / "migrations"))
        config.set_main_option("sqlalchemy.url", app_url(url))
        command.upgrade(config, "head")
        command.upgrade(config, "head")  # again: nothing to do on either side
        engine = create_engine(app_url(url))
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            app = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
            ours = conn.execute(text(
                f"SELECT version_num FROM {EMBEDDED_VERSION_TABLE}")).scalar_one()
        engine.dispose()
        assert {"invoices", "blobs", "documents", "idempotency_keys"} <= tables
        assert (app, ours) == ("app_0001", "0010")
    finally:
        if kind == "postgresql":
            await drop_database(url)
