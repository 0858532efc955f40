"""The ledger inside an application's database: built on the application's own engine, its
migrations recorded in a version table of their own beside the application's, and a database
at the previous head (0003) upgraded in place."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, inspect, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from blobledger import ConfigError, Ledger
from blobledger.config import Settings
from blobledger.db import EMBEDDED_VERSION_TABLE, Database, configure_sqlite, normalise_url
from blobledger.protocol.migrate import migrate_database, upgrade
from blobledger.protocol.models import BlobState
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
        assert app == [("app_0007",)] and ours == "0010"
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
        await migrate_database(db)
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


async def test_an_open_application_session_does_not_block_the_ledgers_reads(
        tmp_path: Path) -> None:
    """On SQLite (the embedded default) an application reads an owner in its session and
    streams the attachment before closing that session, on the same engine: the ledger's
    reads take no write lock (plain ``BEGIN``), so they finish at once instead of waiting for
    the busy timeout (1 s here) and failing with ``database is locked``. Its writes still
    queue behind the application's open write transaction (``BEGIN IMMEDIATE``)."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    engine = create_async_engine(normalise_url(url))
    configure_sqlite(engine)

    @event.listens_for(engine.sync_engine, "connect")
    def _short_busy_timeout(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout=1000")

    try:
        async with engine.begin() as conn:
            await conn.run_sync(Invoice.metadata.create_all)
        store = f"file://{tmp_path / 'blobs'}"
        settings = Settings(database_url=url, store_url=store)
        async with Ledger.from_engine(engine, store, settings=settings) as ledger:
            staged = await ledger.stage(b"read me while my owner is open", filename="r.pdf")
            sessions = async_sessionmaker(engine, expire_on_commit=False)
            async with sessions() as session, session.begin():
                session.add(Invoice(id=1, number="INV-1", pdf=staged))
            async with sessions() as session, session.begin():
                invoice = await session.get(Invoice, 1)
                assert invoice is not None and invoice.pdf is not None
                started = time.monotonic()
                data = b"".join([c async for c in ledger.read_attachment(invoice.pdf)])
                assert (await ledger.attachment(invoice.pdf.name)).size == len(data)
                assert await ledger.page() == []
                waited = time.monotonic() - started
            assert data == b"read me while my owner is open"
            assert waited < 0.5, f"the ledger's reads waited {waited:.2f} s"
            async with sessions() as session, session.begin():
                await session.get(Invoice, 1)
                with pytest.raises(OperationalError, match="locked"):
                    await ledger.stage(b"a write waits for the application's transaction")
    finally:
        await engine.dispose()
