"""Where the explorer's ledgers live: a database (SQLite or PostgreSQL) with a store (local
disk, Azurite or moto's S3), fresh for every example, and an application table beside the
ledger's own (``explore_owners``: one attachment per row) for A4 and the detach steps."""

from __future__ import annotations

import itertools
import shutil
import uuid
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.migrate import migrate_database
from blobledger.sqlalchemy import Attachment, has_one_attached
from blobledger.stores import Store
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from tests.support.services import Azurite, MotoS3, create_database, drop_database

DATABASES = ("sqlite", "postgres")
STORES = ("local", "azure", "s3")
#: small enough that a few hundred bytes go through Azure's blocks and S3's multipart path
SMALL_PUT = 256


class AppBase(DeclarativeBase):
    pass


class OwnerRow(AppBase):
    """An application's row holding one attachment."""

    __tablename__ = "explore_owners"

    id: Mapped[int] = mapped_column(primary_key=True)
    file: Mapped[Attachment | None] = has_one_attached()


class Backend:
    """One database kind with one store kind; every example starts from empty tables and an
    empty container, bucket or folder.

    PostgreSQL: one migrated database per run (``database_url``, or one created for the run
    and dropped after it), truncated per example. SQLite: a file copied per example from a
    migrated template."""

    def __init__(self, db: str, store: str, root: Path, *, azurite: Azurite | None = None,
                 moto: MotoS3 | None = None, database_url: str | None = None) -> None:
        if db not in DATABASES or store not in STORES:
            raise ValueError(f"no backend {db}-{store}")
        self.db, self.store, self.root = db, store, root
        self.azurite, self.moto = azurite, moto
        self.database_url = database_url or ""
        self.own_database = db == "postgres" and database_url is None
        self.template = root / "template.db"
        self.count = itertools.count()
        self.name = f"{'postgresql' if db == 'postgres' else 'sqlite'}-{store}"

    async def start(self) -> None:
        """Once per run: the migrated template or database, with the owners' table."""
        if self.db == "sqlite":
            self.database_url = f"sqlite:///{self.template}"
        elif self.own_database:
            self.database_url = await create_database()
        db = Database(self.database_url)
        try:
            await migrate_database(db)
            async with db.engine.begin() as conn:
                await conn.run_sync(AppBase.metadata.create_all)
        finally:
            await db.dispose()

    async def stop(self) -> None:
        if self.own_database:
            await drop_database(self.database_url)

    async def fresh(self, settings: Settings) -> Ledger:
        n = next(self.count)
        url = await self._fresh_database(n)
        store = await self._fresh_store(n)
        return Ledger(Database(url), store, settings.with_(database_url=url,
                                                           store_url=store.url),
                      migrate=False)

    async def _fresh_database(self, n: int) -> str:
        if self.db == "sqlite":
            path = self.root / f"example-{n}.db"
            shutil.copyfile(self.template, path)
            return f"sqlite:///{path}"
        db = Database(self.database_url)
        try:
            async with db.session() as session:
                tables = (await session.execute(text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND tablename NOT IN ('alembic_version', 'buckets')"))).scalars().all()
                await session.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)))
        finally:
            await db.dispose()
        return self.database_url

    async def _fresh_store(self, n: int) -> Store:
        if self.store == "local":
            return LocalStore(self.root / f"store-{n}")
        if self.store == "azure":
            assert self.azurite is not None
            return AzureStore(f"x{uuid.uuid4().hex[:20]}",
                              connection_string=self.azurite.connection_string,
                              single_put_limit=SMALL_PUT, block_size=SMALL_PUT)
        assert self.moto is not None
        return self.moto.store(single_put_limit=SMALL_PUT)


def SqliteLocal(root: Path) -> Backend:
    """SQLite and local disk."""
    return Backend("sqlite", "local", root)


def PostgresAzure(root: Path, azurite: Azurite,
                  database_url: str | None = None) -> Backend:
    """PostgreSQL and Azurite (small single-put and block sizes: uploads go in blocks)."""
    return Backend("postgres", "azure", root, azurite=azurite, database_url=database_url)


def PostgresS3(root: Path, moto: MotoS3,
               database_url: str | None = None) -> Backend:
    """PostgreSQL and moto's S3 (a small single-put limit: uploads go multipart)."""
    return Backend("postgres", "s3", root, moto=moto, database_url=database_url)
