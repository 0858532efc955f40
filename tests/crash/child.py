"""The process the crash tests kill or pause: it opens a ledger on the given database and
store, arms one failpoint and runs one operation. It is forked from a server that has already
imported blobledger (``multiprocessing`` ``forkserver``), so a child costs a fork, not an
interpreter start; it still dies by a real SIGKILL with no cleanup of any kind.

A paused child (``stop`` action) stops itself with SIGSTOP at the point; on SIGCONT its
clock jumps to ``Job.wake_offset`` (the time that passed while it slept) and it carries on,
then writes what its caller would have been told to ``Job.report`` as JSON: the document
(``id``, ``version``, ``sha256``) or the error (``error``, its class names, ``message``)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from blobledger import failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.stores import Store
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from tests.support.clock import set_clock_offset

CHUNK = 64 * 1024
# Small limits so a payload of a few chunks is a staged upload on Azure (blocks, then
# Put Block List): the crash points inside an upload then leave uncommitted blocks.
AZURE_OPTIONS: dict[str, Any] = {"single_put_limit": CHUNK, "block_size": CHUNK}
SETTINGS = {"upload_deadline": 60.0, "sweep_after": 180.0, "delete_grace": 30.0,
            "resumable_expiry": 120.0}


@dataclass(frozen=True)
class Target:
    """Where a ledger lives: a database URL and a store (a folder, an Azure container, or a
    bucket on moto's S3 server)."""

    database_url: str
    store: str  # "local", "azure" or "s3"
    location: str  # the folder, the container or the bucket
    connection_string: str | None = None  # Azure's; for S3 the server's endpoint URL
    azure_options: dict[str, Any] = field(default_factory=lambda: dict(AZURE_OPTIONS))
    retag: str = "inline"  # BLOBLEDGER_RETAG of every ledger opened on the target

    def open_store(self) -> Store:
        if self.store == "local":
            return LocalStore(self.location)
        if self.store == "s3":
            from blobledger.stores.s3 import S3Store
            from tests.support.services import MOTO_CAPABILITIES

            return S3Store(self.location, endpoint_url=self.connection_string,
                           region="us-east-1", path_style=True, access_key="testing",
                           secret_key="testing", capabilities=MOTO_CAPABILITIES)
        return AzureStore(self.location, connection_string=self.connection_string,
                          **self.azure_options)

    def ledger(self, *, clock_offset: float = 0.0, migrate: bool = False) -> Ledger:
        store = self.open_store()
        settings = Settings(database_url=self.database_url, store_url=store.url,
                            upload_deadline=SETTINGS["upload_deadline"],
                            sweep_after=SETTINGS["sweep_after"],
                            delete_grace=SETTINGS["delete_grace"],
                            resumable_expiry=SETTINGS["resumable_expiry"],
                            retag=self.retag)
        return Ledger(Database(self.database_url), store, settings,
                      clock_offset=clock_offset, migrate=migrate)


def payload(seed: int, size: int = 4 * CHUNK) -> bytes:
    """Deterministic bytes for a seed (the parent recomputes them to compare)."""
    return random.Random(seed).randbytes(size)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start : start + CHUNK]
        await asyncio.sleep(0)


@dataclass(frozen=True)
class Job:
    """One operation under one armed failpoint."""

    target: Target
    failpoints: str
    op: str  # create | replace | delete | sweep | retag | tus | direct | process
    args: dict[str, Any] = field(default_factory=dict)
    clock_offset: float = 0.0
    #: where a paused child writes its outcome (JSON), and its clock offset once woken
    report: str | None = None
    wake_offset: float | None = None


class PutRefused(Exception):
    """The client's own create-only put to the store's URL was refused: the name holds
    bytes already (a real client gets the store's 409 or 412; the service said nothing)."""


async def direct_upload(ledger: Ledger, name: str, data: bytes,
                        upload_id: str | None = None) -> str:
    """A direct upload: the intent, the client's create-only put (to serve, or to the
    store's URL: here the store's own put, as that URL's client would), the completion."""
    from blobledger.errors import BlobAlreadyExists
    from blobledger.protocol.models import PENDING_TAG
    from blobledger.uploads.direct import DirectUploads

    direct = DirectUploads(ledger)
    if upload_id is None:
        began = await direct.begin(name, len(data), sha256=sha256(data))
        upload_id = began.upload.id
        if began.token is not None:
            await direct.receive(upload_id, began.token, chunks(data))
        else:
            try:
                await ledger.store.put(began.upload.blob_name, chunks(data), tags=PENDING_TAG)
            except BlobAlreadyExists:
                raise PutRefused(began.upload.blob_name) from None
            await failpoints.hit("direct.after_upload")
    else:  # resumed: the client re-sends only if nothing arrived
        upload = await direct.find(upload_id)
        with contextlib.suppress(BlobAlreadyExists):
            await ledger.store.put(upload.blob_name, chunks(data), tags=PENDING_TAG)
    return (await direct.complete(upload_id)).id


async def _run(job: Job) -> dict[str, Any]:
    failpoints.configure(job.failpoints)
    args = job.args
    async with job.target.ledger(clock_offset=job.clock_offset) as ledger:
        if job.wake_offset is not None:
            wake = job.wake_offset
            # Runs in the main thread right after SIGCONT, before the next bytecode of the
            # stopped code: the writer wakes to a clock that moved on while it slept.
            signal.signal(signal.SIGCONT, lambda *_: set_clock_offset(ledger, wake))
        if "settings" in args:  # e.g. the processors of held documents
            ledger.settings = ledger.settings.with_(**args["settings"])
        if job.op == "create":
            return _answer(await ledger.create(
                args["name"], chunks(payload(args["seed"])), idempotency_key=args.get("key")))
        if job.op == "replace":
            return _answer(await ledger.replace(args["doc_id"], chunks(payload(args["seed"])),
                                                expected_version=args["version"]))
        if job.op == "delete":
            await ledger.delete(args["doc_id"], expected_version=args["version"])
            return {"deleted": args["doc_id"]}
        if job.op == "tus":
            from blobledger.uploads.resumable import Resumable

            resumable = Resumable(ledger, segment=CHUNK)
            data = payload(args["seed"])
            upload = await resumable.create(len(data), {"name": args["name"]})
            await resumable.append(upload, 0, chunks(data))
            doc = await resumable.complete(await resumable.find(upload.id))
            assert isinstance(doc, Document)  # a document's upload (no `attachment` key)
            return _answer(doc)
        if job.op == "direct":
            doc_id = await direct_upload(ledger, args["name"], payload(args["seed"]))
            return _answer(await ledger.get(doc_id))
        if job.op == "process":
            from blobledger.workers.processing import ProcessingWorker

            return {"processing": (await ProcessingWorker(ledger).run_once()).as_dict()}
        if job.op == "retag":
            from blobledger.workers.retagger import Retagger

            retags = await Retagger(ledger).run_once()
            return {"retag": retags.__dict__}
        if job.op == "sweep":
            from blobledger.workers.sweeper import Sweeper

            report = await Sweeper(ledger).run_once()
            return {"sweep": report.as_dict()}
        raise ValueError(f"unknown operation {job.op}")


def _answer(doc: Document) -> dict[str, Any]:
    return {"id": doc.id, "version": doc.version, "sha256": doc.sha256}


async def _outcome(job: Job) -> dict[str, Any]:
    """What the caller was told: the answer, or the error it got."""
    try:
        return await _run(job)
    except Exception as exc:
        return {"error": type(exc).__name__,
                "classes": [cls.__name__ for cls in type(exc).__mro__],
                "message": str(exc)}


def main(job: Job) -> None:
    """Entry point in the child: run the job; exit 0 if the failpoint was never reached
    (or, for a paused job, once its outcome is written)."""
    if job.report is None:
        asyncio.run(_run(job))
    else:
        outcome = asyncio.run(_outcome(job))
        with open(job.report, "w") as out:
            json.dump(outcome, out)
    os._exit(0)
