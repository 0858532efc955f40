"""What every measured case shares: its result, its context, container names and counts.

The cases talk to the Azure SDK directly (``azure.storage.blob.aio``) on purpose: they
measure what the SDK and the service do. The bounded clients and the reading of SDK answers
live in :mod:`blobledger.workers.doctor.azure_client`, which the doctor's checks share.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from azure.storage.blob.aio import BlobServiceClient, ContainerClient
from sqlalchemy import DateTime, Index, Integer, String, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from blobledger._base.logs import first_line as first_line
from blobledger._base.names import new_blob_name
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.models import utcnow

# the SDK clients and answers, shared with the doctor's Azure checks
from blobledger.workers.doctor.azure_client import (
    BLOCK as BLOCK,
)
from blobledger.workers.doctor.azure_client import (
    SINGLE_PUT as SINGLE_PUT,
)
from blobledger.workers.doctor.azure_client import (
    TAG_HINT as TAG_HINT,
)
from blobledger.workers.doctor.azure_client import (
    azure_container as azure_container,
)
from blobledger.workers.doctor.azure_client import (
    check_tag_permission as check_tag_permission,
)
from blobledger.workers.doctor.azure_client import (
    error_code as error_code,
)
from blobledger.workers.doctor.azure_client import (
    fatal as fatal,
)
from blobledger.workers.doctor.azure_client import (
    http as http,
)
from blobledger.workers.doctor.azure_client import (
    is_permission_error as is_permission_error,
)
from blobledger.workers.doctor.azure_client import (
    retry_policy as retry_policy,
)
from blobledger.workers.doctor.azure_client import (
    service_client as service_client,
)


@dataclass
class CaseResult:
    """One measured case: the printed lines and the figures they were made from."""

    letter: str
    title: str
    lines: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def say(self, line: str) -> None:
        self.lines.append(line)

    def to_json(self) -> dict[str, Any]:
        return {"case": self.letter, "title": self.title, "lines": self.lines,
                "figures": self.figures, "error": self.error}


@dataclass
class Context:
    """What a case may use: its own empty container, a work folder and the settings."""

    service: BlobServiceClient
    container: ContainerClient
    workdir: Path
    settings: Settings

    async def blob_names(self) -> list[str]:
        return [name async for name in self.container.list_blob_names()]


Case = Callable[[Context, CaseResult], Awaitable[None]]


def case_container(base: str, letter: str, run_id: str) -> str:
    """``<base>-<letter><run id>``: a fresh, valid container name of at most 63 characters."""
    suffix = f"-{letter.lower()}{run_id}"
    head = base.lower()[: 63 - len(suffix)].rstrip("-")
    return f"{head}{suffix}"


def new_run_id() -> str:
    return uuid.uuid4().hex[:10]


# -- the article's table, in SQLAlchemy ----------------------------------------------------
class Base(DeclarativeBase):
    pass


class Doc(Base):
    """The article's ``Documents`` table, with a unique index on ``name``."""

    __tablename__ = "documents"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), nullable=False)
    blob_name: Mapped[str] = mapped_column(String(255), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default="Ready")
    created_utc: Mapped[datetime] = mapped_column(DateTime(), nullable=False, default=utcnow)

    __table_args__ = (Index("ux_documents_name", "name", unique=True),)


async def article_database(ctx: Context, name: str) -> Database:
    """A fresh SQLite file in the case's work folder with the article's table."""
    db = Database(f"sqlite:///{ctx.workdir / name}.db")
    async with db.engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    return db


async def row_count(db: Database) -> int:
    async with db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Doc)) or 0)


async def row_blob_names(db: Database) -> set[str]:
    async with db.session() as session:
        return set((await session.scalars(select(Doc.blob_name))).all())


def blob_name() -> str:
    """``documents/<uuid hex>.txt``, made by :mod:`blobledger._base.names` like every blob name."""
    return new_blob_name("documents", "upload.txt")
