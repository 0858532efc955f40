"""The ledger inside an application's database: built on the application's own engine, its
migrations recorded in a version table of their own beside the application's, and a database
at the previous head (0003) upgraded in place."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from blobledger import ConfigError, Ledger
from blobledger.config import Settings
from blobledger.db import EMBEDDED_VERSION_TABLE, Database, configure_sqlite, normalise_url
from blobledger.migrate import upgrade
from blobledger.models import BlobState
from tests.attachments.conftest import Invoice
from tests.attachments.test_attach import states
from tests.support.services import create_database, drop_database


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_on_the_applications_engine(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else await create_database()
    engine = create_async_engine(normalise_url(url))
    if kind == "sqlite":
        configure_sqlite(engine)
    try:
        async with engine.begin() as conn:  # the application's own migrations came first
            await conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32))"))
            await conn.execute(text("INSERT INTO alembic_version VALUES ('app_0007')"))
            await conn.run_sync(Invoice.metadata.create_all)
        store = f"file://{tmp_path / 'blobs'}"
        settings = Settings(database_url=url,
store_url=store)
        async with Ledger.from_engine(engine, store, settings=settings) as ledger:
            staged = await ledger.stage(b"embedded", filename="e.pdf")
            sessions = async_sessionmaker(engine)
            async with sessions() as session, session.begin():
                session.add(Invoice(id=1, number="INV-1", pdf=staged))
            assert (await states(ledger))[staged.name] == BlobState.ATTACHED
        async with engine.connect() as conn:  # the engine is still the application's
            app = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
            ours = (await conn.execute(text(
                f"SELECT version_num FROM {EMBEDDED_VERSION_TABLE}"))).scalar_one()
        assert app == [("app_0007",)] and ours == "0005"
    finally:
        await engine.dispose()
        if kind == "postgresql":
            await drop_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_upgrade_from_0003(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}" if kind == "sqlite" else await create_database()
    try:
        db = Database(url)
        async with db.engine.begin() as conn:
            await conn.run_sync(upgrade, "0003")
            await conn.execute(text(
                "INSERT INTO blobs (name, document_id, kind, state, content_type, lease_until, "
                "created_at, changed_at) VALUES ('documents/old', 'd1', 'create', 'pending', "
                "'text/plain', '2026-01-01', '2026-01-01', '2026-01-01')"))
        await db.migrate()
        async with db.engine.connect() as conn:
            columns = await conn.run_sync(
                lambda sync: {c["name"]: c for c in inspect(sync).get_columns("blobs")})
            old = (await conn.execute(text(
                "SELECT document_id, owner_table FROM blobs"))).one()
        await db.dispose()
        assert columns["document_id"]["nullable"]
        assert {"owner_table", "owner_key", "owner_column", "filename"} <= set(columns)
        assert tuple(old) == ("d1", None)
        store = f"file://{tmp_path / 'blobs'}"
        settings = Settings(database_url=url, store_url=store)
        async with Ledger.from_urls(url, store, settings=settings) as ledger:
            staged = await ledger.stage(b"after the upgrade")
            assert (await states(ledger))[staged.name] == BlobState.PENDING
    finally:
        if kind == "postgresql":
            await drop_database(url)


def test_a_layout_set_after_the_import_is_refused(tmp_path: Path) -> None:
    url, store = f"sqlite:///{tmp_path / 'x.db'}", f"file://{tmp_path / 'blobs'}"
    with pytest.raises(ConfigError, match="BLOBLEDGER_TABLE_PREFIX"):
        Ledger.from_urls(url, store, settings=Settings(
            database_url=url, store_url=store, table_prefix="late_"))
    plain = Settings(database_url=url, store_url=store, table_prefix="")
    assert Ledger.from_urls(url, store, settings=plain).settings.table_prefix == ""
