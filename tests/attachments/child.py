"""The process the attachment kill tests SIGKILL: it stages a blob under one armed failpoint,
or stages and attaches it to an invoice in an application transaction and dies before or
after the commit. Forked from a server that has imported blobledger already."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from blobledger import failpoints
from tests.attachments.conftest import Invoice, app_url
from tests.crash.child import Target, chunks, payload


@dataclass(frozen=True)
class StageJob:
    target: Target
    failpoints: str
    #: after staging: "nothing" (the failpoint kills), "staged" (die before attaching),
    #: "flush" (die after A4, the transaction open), "commit" (die after the commit)
    then: str
    seed: int = 1
    invoice: int = 1


async def _run(job: StageJob) -> None:
    failpoints.configure(job.failpoints)
    async with job.target.ledger() as ledger:
        staged = await ledger.stage(chunks(payload(job.seed)), content_type="application/pdf",
                                    filename="invoice.pdf")
    if job.then == "nothing":
        return
    if job.then == "staged":
        os.kill(os.getpid(), signal.SIGKILL)
    engine = create_engine(app_url(job.target.database_url))
    with Session(engine) as session:
        session.add(Invoice(id=job.invoice, number=f"INV-{job.invoice}", pdf=staged))
        session.flush()  # A4 ran in this open transaction
        if job.then == "commit":
            session.commit()
        os.kill(os.getpid(), signal.SIGKILL)


def main(job: StageJob) -> None:
    asyncio.run(_run(job))
    os._exit(0)
