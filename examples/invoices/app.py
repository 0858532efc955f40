"""An invoicing service whose ``invoices`` rows each carry a PDF, kept by blobledger.

The application owns its table and its transactions; blobledger owns the bytes. A PDF is
staged first (uploaded, tagged committed, owned by nobody), then attached by the same
transaction that writes the invoice: both commit, or neither does. Replacing or removing the
PDF, or deleting the invoice, hands the old bytes to blobledger's outbox in that same
transaction; ``blobledger sweep`` (or ``BLOBLEDGER_SWEEP_INTERVAL``) deletes them later, and
removes PDFs that were staged but never attached (a failed request, a crash).

Configuration is blobledger's own (``BLOBLEDGER_DATABASE_URL``, ``BLOBLEDGER_STORE_URL``, …):
one settings source for the application and the ledger, whose tables live in the
application's database. Run it with ``scripts/example`` (SQLite and disk under ``./var/``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import StreamingResponse
from sqlalchemy import String
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from blobledger import BlobLedgerError, Ledger
from blobledger._base.durations import parse_duration
from blobledger.config import Settings, from_env
from blobledger.db import create_engine
from blobledger.sqlalchemy import AttachLost, Attachment, StagedBlob, has_one_attached
from blobledger.workers.sweeper import SWEEP_INTERVAL_ENV, sweep_forever


class Base(DeclarativeBase):
    pass


class Invoice(Base):
    __tablename__ = "invoices"

    id: Mapped[int] = mapped_column(primary_key=True)
    number: Mapped[str] = mapped_column(String(64), unique=True)
    pdf: Mapped[Attachment | None] = has_one_attached()

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "number": self.number,
                "pdf": None if self.pdf is None else self.pdf.to_json()}


def create_app(settings: Settings | None = None, *, sweep_interval: float | None = None,
               ) -> FastAPI:
    """The application; ``settings`` default to the ``BLOBLEDGER_*`` environment."""
    config = settings or from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(config.database_url)  # the application's engine, shared
        try:
            async with Ledger.from_engine(engine, config.store_url, settings=config) as ledger:
                async with engine.begin() as conn:  # a real application: its own Alembic
                    await conn.run_sync(Base.metadata.create_all)
                app.state.ledger = ledger
                app.state.sessions = async_sessionmaker(engine, expire_on_commit=False)
                if not sweep_interval:
                    yield
                    return
                stop = asyncio.Event()
                task = asyncio.create_task(sweep_forever(
                    ledger, interval=sweep_interval, batch=256, stop=stop, wait_for_lock=True))
                try:
                    yield
                finally:
                    stop.set()
                    await task
        finally:
            await engine.dispose()

    app = FastAPI(title="invoices (a blobledger example)", lifespan=lifespan)

    def ledger_of(request: Request) -> Ledger:
        ledger: Ledger = request.app.state.ledger
        return ledger

    def session_of(request: Request) -> AsyncSession:
        sessions: async_sessionmaker[AsyncSession] = request.app.state.sessions
        return sessions()

    async def stage(request: Request, pdf: UploadFile) -> StagedBlob:
        try:
            return await ledger_of(request).stage(
                pdf.file, content_type=pdf.content_type or "application/pdf",
                filename=pdf.filename or None)
        except BlobLedgerError as exc:
            raise HTTPException(400, str(exc)) from exc

    async def found(session: AsyncSession, invoice_id: int) -> Invoice:
        invoice = await session.get(Invoice, invoice_id)
        if invoice is None:
            raise HTTPException(404, f"no invoice {invoice_id}")
        return invoice

    async def commit(session: AsyncSession) -> None:
        try:
            await session.commit()
        except AttachLost as exc:  # the PDF was swept before this transaction attached it
            raise HTTPException(503, str(exc), headers={"Retry-After": "1"}) from exc
        except IntegrityError as exc:  # the staged PDF stays unattached: the sweeper's
            raise HTTPException(409, "an invoice with that number exists") from exc

    @app.post("/invoices", status_code=201)
    async def create_invoice(request: Request, number: Annotated[str, Form()],
                             pdf: Annotated[UploadFile, File()]) -> dict[str, Any]:
        staged = await stage(request, pdf)  # A1-A3, before the transaction
        async with session_of(request) as session:
            invoice = Invoice(number=number, pdf=staged)
            session.add(invoice)
            await commit(session)  # the invoice and A4 together
            return invoice.to_json()

    @app.get("/invoices/{invoice_id}")
    async def get_invoice(request: Request, invoice_id: int) -> dict[str, Any]:
        async with session_of(request) as session:
            return (await found(session, invoice_id)).to_json()

    @app.get("/invoices/{invoice_id}/pdf")
    async def get_pdf(request: Request, invoice_id: int) -> StreamingResponse:
        async with session_of(request) as session:
            pdf = (await found(session, invoice_id)).pdf
        if pdf is None:
            raise HTTPException(404, f"invoice {invoice_id} has no PDF")
        _, reader = await ledger_of(request).open_attachment(pdf)

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in reader:
                    yield chunk
            finally:
                await reader.aclose()

        disposition = f'attachment; filename="{pdf.filename or "invoice.pdf"}"'
        return StreamingResponse(body(), media_type=pdf.content_type, headers={
            "Content-Length": str(pdf.size), "Content-Disposition": disposition})

    @app.put("/invoices/{invoice_id}/pdf")
    async def replace_pdf(request: Request, invoice_id: int,
                          pdf: Annotated[UploadFile, File()]) -> dict[str, Any]:
        staged = await stage(request, pdf)
        async with session_of(request) as session:
            invoice = await found(session, invoice_id)
            invoice.pdf = staged  # A4 for the new PDF, the old one to the outbox
            await commit(session)
            return invoice.to_json()

    @app.delete("/invoices/{invoice_id}/pdf")
    async def remove_pdf(request: Request, invoice_id: int) -> dict[str, Any]:
        async with session_of(request) as session:
            invoice = await found(session, invoice_id)
            invoice.pdf = None  # the PDF to the outbox, in this transaction
            await commit(session)
            return invoice.to_json()

    @app.delete("/invoices/{invoice_id}", status_code=204)
    async def delete_invoice(request: Request, invoice_id: int) -> None:
        async with session_of(request) as session:
            await session.delete(await found(session, invoice_id))  # its PDF to the outbox
            await commit(session)

    return app


def _interval() -> float | None:
    text = os.environ.get(SWEEP_INTERVAL_ENV, "").strip()
    return parse_duration(text, what=SWEEP_INTERVAL_ENV) if text else None


def main() -> FastAPI:
    """The application configured by the environment (``uvicorn --factory``)."""
    return create_app(sweep_interval=_interval())
