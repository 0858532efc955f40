"""A synchronous application: the blocking ledger stages, a plain ``Session`` attaches, the
bytes stream back through blocking calls; on SQLite and PostgreSQL."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.orm import sessionmaker

from blobledger import NotFound
from blobledger.blocking import BlockingLedger
from blobledger.config import Settings
from blobledger.db import Database
from tests.attachments.conftest import Invoice, app_engine
from tests.conftest import run_sync


async def _truncate(url: str) -> None:
    db = Database(url)
    async with db.transaction() as conn:
        await conn.execute(text("TRUNCATE documents, blobs, idempotency_keys"))
    await db.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_sync_application(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'app.db'}"
    else:
        url = request.getfixturevalue("pg_url")
        run_sync(_truncate(url))
    store = f"file://{tmp_path / 'blobs'}"
    settings = Settings(database_url=url, store_url=store)
    with BlockingLedger.from_urls(url, store, settings=settings) as ledger:
        engine = app_engine(url)
        sessions = sessionmaker(engine)
        data = b"%PDF " + bytes(range(256)) * 4000
        staged = ledger.stage(io.BytesIO(data), filename="inv.pdf",
                              content_type="application/pdf")
        with pytest.raises(NotFound):
            ledger.attachment(staged.name)
        with sessions.begin() as session:
            session.add(Invoice(id=1, number="INV-1", pdf=staged))
        with sessions() as session:
            pdf = session.get_one(Invoice, 1).pdf
        assert pdf is not None and pdf.filename == "inv.pdf"
        assert ledger.attachment(pdf.name) == pdf
        assert b"".join(ledger.read_attachment(pdf)) == data
        assert b"".join(ledger.read_attachment(pdf, 5, 10)) == data[5:15]
        engine.dispose()
