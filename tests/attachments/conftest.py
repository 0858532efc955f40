"""An application beside the ledger: an ``invoices`` table (one PDF, many scans) in the
ledger's own database, with its own sync engine, as an application would have it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, String, create_engine, text
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from blobledger import Ledger
from blobledger.protocol.migrate import alembic_config
from blobledger.sqlalchemy import Attachment, has_many_attached, has_one_attached


class AppBase(DeclarativeBase):
    pass


class Invoice(AppBase):
    __tablename__ = "test_invoices"

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str] = mapped_column(String(64))
    pdf: Mapped[Attachment | None] = has_one_attached()
    scans: Mapped[tuple[Attachment, ...]] = has_many_attached()


class Receipt(AppBase):
    """A second owner table whose rows share keys and a column name with the invoices'."""

    __tablename__ = "test_receipts"

    id: Mapped[int] = mapped_column(primary_key=True)
    pdf: Mapped[Attachment | None] = has_one_attached()


def ledger_head() -> str:
    """The revision the ledger's migrations end at."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def app_url(ledger_url: str) -> str:
    """The ledger's database as a synchronous application would reach it."""
    return ledger_url.replace("postgresql://", "postgresql+psycopg://", 1) \
        if ledger_url.startswith("postgresql://") else ledger_url


def app_engine(ledger_url: str) -> Engine:
    engine = create_engine(app_url(ledger_url))
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS test_invoices"))
        conn.execute(text("DROP TABLE IF EXISTS test_receipts"))
    AppBase.metadata.create_all(engine)
    return engine


@pytest.fixture
def sessions(ledger: Ledger) -> Iterator[sessionmaker[Session]]:
    engine = app_engine(ledger.db.url)
    yield sessionmaker(engine, expire_on_commit=True)
    engine.dispose()
