"""Cases E, A, B and F: what a database transaction does and does not do for an upload.

E: a rollback leaves the uploaded blob. A: the naive handler (upload, then insert) orphans
the blob when the insert hits the unique index. B: a compensating delete on the failure path
removes it. F: the same compensation in a SQLAlchemy session event hook (``after_rollback``),
the counterpart of EF Core's ``SaveChangesFailedAsync`` interceptor.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob.aio import ContainerClient
from sqlalchemy import event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session
from sqlalchemy.util import await_

from blobledger.db import Database
from blobledger.experiments.common import (
    CaseResult,
    Context,
    Doc,
    article_database,
    blob_name,
    first_line,
    row_blob_names,
    row_count,
)

CONTENT = b"hello from the request"


class _Rollback(Exception):
    """Raised inside a transaction to roll it back (the explicit rollback of case E)."""


async def _seed(db: Database, name: str) -> None:
    """A live row holding ``name`` (its blob is elsewhere): the next insert of it collides."""
    async with db.session() as session:
        session.add(Doc(name=name, blob_name=blob_name(), status="Ready"))


async def _figures(ctx: Context, db: Database, result: CaseResult, *, orphans: bool) -> None:
    rows = await row_count(db)
    blobs = await ctx.blob_names()
    result.figures.update(rows=rows, blobs=len(blobs))
    line = f"rows={rows} blobs={len(blobs)}"
    if orphans:
        referenced = await row_blob_names(db)
        orphaned = len([name for name in blobs if name not in referenced])
        result.figures["orphaned"] = orphaned
        line += f" orphaned={orphaned}"
    result.say(line)


async def case_e(ctx: Context, result: CaseResult) -> None:
    """Insert a row, upload inside the same transaction, roll back: the blob stays."""
    db = await article_database(ctx, "e")
    try:
        name = blob_name()
        try:
            async with db.session() as session:
                session.add(Doc(name="tx", blob_name=name, status="Ready"))
                await session.flush()
                await ctx.container.get_blob_client(name).upload_blob(CONTENT)
                raise _Rollback
        except _Rollback:
            pass
        await _figures(ctx, db, result, orphans=False)
    finally:
        await db.dispose()


async def case_a(ctx: Context, result: CaseResult) -> None:
    """Upload, then insert a name the unique index already holds."""
    db = await article_database(ctx, "a")
    try:
        await _seed(db, "report.pdf")
        name = blob_name()
        await ctx.container.get_blob_client(name).upload_blob(CONTENT)
        try:
            async with db.session() as session:
                session.add(Doc(name="report.pdf", blob_name=name, status="Ready"))
        except IntegrityError as exc:
            result.say(f"commit raised {_reason(exc)}")
            result.figures["exception"] = type(exc.orig).__name__ if exc.orig else "IntegrityError"
        await _figures(ctx, db, result, orphans=True)
    finally:
        await db.dispose()


async def _delete_if_exists(container: ContainerClient, name: str) -> bool:
    try:
        await container.get_blob_client(name).delete_blob(delete_snapshots="include")
    except ResourceNotFoundError:
        return False
    return True


async def case_b(ctx: Context, result: CaseResult) -> None:
    """Upload, insert fails, the except block deletes the blob (then re-raises)."""
    db = await article_database(ctx, "b")
    try:
        await _seed(db, "report.pdf")
        name = blob_name()
        await ctx.container.get_blob_client(name).upload_blob(CONTENT)
        try:
            try:
                async with db.session() as session:
                    session.add(Doc(name="report.pdf", blob_name=name, status="Ready"))
            except IntegrityError:
                deleted = await _delete_if_exists(ctx.container, name)
                result.say(f"compensating delete (if exists) returned {deleted}")
                result.figures["compensated"] = deleted
                raise
        except IntegrityError:
            pass  # the request fails; the storage side is clean
        await _figures(ctx, db, result, orphans=False)
    finally:
        await db.dispose()


@dataclass
class PendingBlobs:
    """Blob names uploaded in the current unit of work (one per request, like a scoped
    service): deleted if its transaction rolls back, forgotten once it commits."""

    names: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)


def install_compensation(session: AsyncSession, container: ContainerClient,
                         pending: PendingBlobs) -> None:
    """Hook the compensating delete into the session's transaction events.

    SQLAlchemy's event hooks are synchronous; under ``AsyncSession`` they run inside its
    greenlet, where :func:`sqlalchemy.util.await_` may await the SDK's delete.
    """

    def after_rollback(_session: Session) -> None:
        failure = sys.exc_info()[1]
        pending.fired.append(type(failure).__name__ if failure else "rollback")
        for name in list(pending.names):
            with contextlib.suppress(ResourceNotFoundError):
                await_(container.get_blob_client(name).delete_blob())
        pending.names.clear()

    def after_commit(_session: Session) -> None:
        pending.names.clear()

    event.listen(session.sync_session, "after_rollback", after_rollback)
    event.listen(session.sync_session, "after_commit", after_commit)


async def case_f(ctx: Context, result: CaseResult) -> None:
    """The handler only uploads and adds its row; the hook does the compensation."""
    db = await article_database(ctx, "f")
    try:
        await _seed(db, "report.pdf")
        pending = PendingBlobs()
        try:
            async with db.session() as session:
                install_compensation(session, ctx.container, pending)
                name = blob_name()
                await ctx.container.get_blob_client(name).upload_blob(CONTENT)
                pending.names.append(name)
                session.add(Doc(name="report.pdf", blob_name=name, status="Ready"))
        except IntegrityError:
            pass
        cause = pending.fired[0] if pending.fired else "nothing"
        result.say(f"hook: after_rollback fired for {cause}"
                   if pending.fired else "hook: after_rollback did not fire")
        result.figures["hook_fired"] = len(pending.fired)
        await _figures(ctx, db, result, orphans=False)
    finally:
        await db.dispose()


def _reason(exc: IntegrityError) -> str:
    orig: Any = exc.orig
    if orig is None:
        return f"IntegrityError: {first_line(exc)}"
    return f"{type(orig).__module__}.{type(orig).__name__}: {first_line(orig)}"
