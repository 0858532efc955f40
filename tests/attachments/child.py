"""The process the attachment kill tests SIGKILL: it stages a blob under one armed failpoint
(``Ledger.stage``, or as a client's direct or tus attachment upload that the application
then takes with ``staged_upload``), or stages and attaches it to an invoice in an
application transaction and dies before or after the commit. Forked from a server that has
imported blobledger already."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from blobledger import failpoints
from blobledger.protocol.attachments import StagedBlob, StagedUpload
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import PENDING_TAG
from blobledger.uploads.direct import DirectUploads
from blobledger.uploads.resumable import Resumable
from tests.attachments.conftest import Invoice, app_url
from tests.crash.child import CHUNK, Target, chunks, payload, sha256


@dataclass(frozen=True)
class StageJob:
    target: Target
    failpoints: str
    #: after staging: "nothing" (the failpoint kills), "staged" (die before attaching),
    #: "flush" (die after A4, the transaction open), "commit" (die after the commit)
    then: str
    seed: int = 1
    invoice: int = 1
    #: how the blob is staged: "stage" (Ledger.stage), "direct" or "tus" (a client's upload)
    via: str = "stage"


async def stage(ledger: Ledger, job: StageJob) -> StagedBlob:
    """The blob staged the job's way (an upload: the client's steps, then the
    application's ``staged_upload``)."""
    if job.via == "stage":
        return await ledger.stage(chunks(payload(job.seed)), content_type="application/pdf",
                                  filename="invoice.pdf")
    done = await upload_attachment(ledger, job.via, job.seed, job.invoice)
    staged = await ledger.staged_upload(done.upload_id)
    assert staged.target == done.target == f"invoices/{job.invoice}/pdf"
    return staged


async def upload_attachment(ledger: Ledger, via: str, seed: int = 1,
                            invoice: int = 1) -> StagedUpload:
    """A client's whole attachment upload (``direct`` or ``tus``); what completion says."""
    data = payload(seed)
    target = f"invoices/{invoice}/pdf"
    if via == "direct":
        direct = DirectUploads(ledger)
        began = await direct.begin(None, len(data), "application/pdf", sha256(data),
                                   attachment=True, filename="invoice.pdf", target=target)
        if began.token is not None:  # to serve
            await direct.receive(began.upload.id, began.token, chunks(data))
        else:  # to the store's URL: here the store's own put, as that URL's client would
            await ledger.store.put(began.upload.blob_name, chunks(data), tags=PENDING_TAG)
            await failpoints.hit("direct.after_upload")
        done = await direct.complete(began.upload.id)
    else:
        resumable = Resumable(ledger, segment=CHUNK)
        upload = await resumable.create(len(data), {
            "attachment": "", "filename": "invoice.pdf", "filetype": "application/pdf",
            "target": target})
        await resumable.append(upload, 0, chunks(data))
        done = await resumable.complete(await resumable.find(upload.id))
    assert isinstance(done, StagedUpload)
    return done


async def _run(job: StageJob) -> None:
    failpoints.configure(job.failpoints)
    async with job.target.ledger() as ledger:
        staged = await stage(ledger, job)
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
