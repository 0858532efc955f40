"""Attachments through SQLAlchemy in the simulation: an application's own table
(``sim_invoices``, one row per attacher) whose ``pdf`` column holds an attachment
(:func:`blobledger.sqlalchemy.has_one_attached`). An attacher stages a blob
(:meth:`Ledger.stage`), then, in an application transaction of an ``AsyncSession`` on the
ledger's own engine, points its invoice at it (A4 in the flush, the blob it held before
detached in the same transaction) and commits. Every statement of that transaction is a
preemption point, and a pause there holds SQLite's write lock (a long application
transaction). The model: the blob an acknowledged commit attached stays readable with its
bytes until a later commit of the same invoice replaced it.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from blobledger.errors import NotFound
from blobledger.protocol.attachments import Attachment, StagedBlob
from blobledger.protocol.ledger import Ledger
from blobledger.sqlalchemy import has_one_attached

if TYPE_CHECKING:
    from tests.sim.sim import _Run


class _Base(DeclarativeBase):
    pass


class Invoice(_Base):
    __tablename__ = "sim_invoices"
    id: Mapped[int] = mapped_column(primary_key=True)
    pdf: Mapped[Attachment | None] = has_one_attached()


async def create_tables(ledger: Ledger) -> None:
    async with ledger.db.engine.begin() as conn:
        await conn.run_sync(_Base.metadata.create_all)


async def attacher(run: _Run, n: int) -> None:
    """Stage, then attach in an application transaction, ``ops`` times on invoice ``n``."""
    from tests.sim.sim import _short

    ledger = run.ledger()
    for i in range(run.config.ops):
        data = f"a{n} attachment{i} {run.rng.getrandbits(32)}".encode()
        sha = hashlib.sha256(data).hexdigest()
        run.note(f"a{n} stage sha={sha[:8]}")
        async def stage(data: bytes = data) -> StagedBlob:
            return await ledger.stage(data, content_type="application/pdf",
                                      filename=f"inv{n}.pdf")

        outcome, staged = await run.op(f"a{n}.stage", stage)
        run.note(f"a{n} stage: {outcome} {getattr(staged, 'name', _short(staged))}")
        if outcome != "ok":
            continue

        async def attach(staged: Any = staged) -> None:
            async with AsyncSession(ledger.db.engine, expire_on_commit=False) as session, \
                    session.begin():
                invoice = await session.get(Invoice, n)
                if invoice is None:
                    invoice = Invoice(id=n)
                    session.add(invoice)
                invoice.pdf = staged

        delay = run.rng.choice(run.config.attach_after)
        if delay:
            run.note(f"a{n} attaches {staged.name} in {delay:.0f}s")
            await asyncio.sleep(delay)
        run.attaching.setdefault(n, set()).add((staged.name, sha))
        outcome, value = await run.op(f"a{n}.attach", attach)
        run.note(f"a{n} attach {staged.name}: {outcome} {_short(value)}")
        if outcome == "ok":
            run.result.acknowledged += 1
            run.attached[n] = (staged.name, sha)
            run.attaching[n] = set()


async def read_back_attachments(run: _Run, ledger: Ledger) -> None:
    """Each invoice's attachment, as its row holds it now: one the model allows (the last
    acknowledged, or one whose commit was not answered), attached, with its bytes."""
    from tests.sim.sim import Violation

    async with AsyncSession(ledger.db.engine) as session:
        for n in set(run.attached) | set(run.attaching):
            invoice = await session.get(Invoice, n)
            held = None if invoice is None or invoice.pdf is None else invoice.pdf.name
            allowed = {name: sha for name, sha in run.attaching.get(n, set())}
            if n in run.attached:
                allowed[run.attached[n][0]] = run.attached[n][1]
            if held is None:
                if n in run.attached:
                    raise Violation(f"invoice {n} holds no attachment, acknowledged "
                                    f"{run.attached[n][0]}")
                continue
            if held not in allowed:
                raise Violation(f"invoice {n} holds {held}, not one attached to it")
            try:
                data = b"".join([c async for c in ledger.read_attachment(held)])
            except NotFound:
                raise Violation(f"invoice {n}'s attachment {held} is not readable") from None
            if hashlib.sha256(data).hexdigest() != allowed[held]:
                raise Violation(f"invoice {n}'s attachment {held}: other bytes")
