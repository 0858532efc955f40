"""The steps every writer of the ledger shares (create, replace and stage): C2's upload
(or the bytes an earlier attempt left), the confirm before C3/R3/A3, C3's conditioned
retag, and the failure path: a lost writer's clean-up and a live writer's compensating
delete of its own blob, tagged pending (the sweeper is the correctness argument)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import NoReturn

from sqlalchemy.exc import DBAPIError

from blobledger import failpoints, telemetry
from blobledger.config import Settings
from blobledger.db import Database, connection_lost, once_more_if_lost
from blobledger.errors import (
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    Digests,
    IdempotencyConflict,
    IntentLost,
    NameTaken,
    UploadAborted,
)
from blobledger.protocol.buckets import Buckets
from blobledger.protocol.documents import Data, as_stream, limit_size
from blobledger.protocol.held import Held
from blobledger.protocol.models import COMMITTED_TAG as COMMITTED
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import STATE_TAG, BlobKind, BlobRow, BlobState
from blobledger.protocol.transitions import Transitions
from blobledger.protocol.transitions.records import Intent
from blobledger.stores import Store
from blobledger.stores.base import Hasher, verify

log = logging.getLogger("blobledger.ledger")

LOST = "the upload was abandoned: its intent was taken over while this attempt was paused"


_STEPS = {
    BlobKind.CREATE: {"begin_create": "C1", "upload": "C2", "confirm": "C2-C3",
                      "tag_committed": "C3", "commit_create": "C4"},
    BlobKind.REPLACE: {"begin_replace": "R1", "upload": "R2", "confirm": "R2-R3",
                       "tag_committed": "R3", "commit_replace": "R4"},
}


def _step(name: str, intent: Intent) -> telemetry.SpanLike:
    """The span of one protocol step of this intent (nothing when tracing is off)."""
    if not telemetry.enabled():
        return telemetry.OFF
    return telemetry.span(name, step=_STEPS[intent.kind][name],
                          document_id=intent.document_id, blob_name=intent.blob_name)




class Steps:
    """What the ledger's writers share: its database, store and transitions, and the steps
    of an intent's bytes (C2, confirm, C3) and of its failure path."""

    db: Database
    store: Store
    transitions: Transitions
    held: Held
    #: the buckets: namespaces of documents and their settings (``protocol/buckets.py``)
    buckets: Buckets
    #: set by every C4/R4 that left its retag owed (see ``Ledger.retag_owed``)
    retag_owed: asyncio.Event

    @property
    def settings(self) -> Settings:
        return self.transitions.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.transitions.settings = settings

    # -- steps shared by create and replace -----------------------------------------------
    async def upload(
        self, intent: Intent, data: Data, sha256: str | None = None, md5: str | None = None,
        *, resumed: bool = False,
    ) -> Digests:
        """C2/R2: create-only put of the intent's blob, within the intent's deadline."""
        remaining = intent.deadline - asyncio.get_running_loop().time()
        stream = failpoints.stream(
            limit_size(as_stream(data), self.settings.max_upload_bytes if intent.cap is None
                       else min(intent.cap, self.settings.max_upload_bytes)),
            "put.mid_stream")
        try:
            async with asyncio.timeout(max(remaining, 0.001)):
                if resumed and (done := await self._already_uploaded(intent, stream)):
                    verify(done, sha256, md5)
                    return done
                return await self.store.put(
                    intent.blob_name, stream, tags=PENDING, content_type=intent.content_type,
                    expected_sha256=sha256, expected_md5=md5)
        except TimeoutError:
            raise UploadAborted("the upload ran past its deadline") from None
        except BlobAlreadyExists as exc:
            # A create-only put of our own name failed: either our own earlier attempt
            # won (a lost response, an SDK retry, a resumed intent) or the bytes differ.
            info = await self.store.stat(intent.blob_name)
            if exc.computed is not None and info.sha256 == exc.computed.sha256:
                return exc.computed
            if resumed:
                raise IdempotencyConflict(
                    "idempotency key was used with different bytes") from None
            raise

    async def _already_uploaded(
        self, intent: Intent, stream: AsyncIterable[bytes]
    ) -> Digests | None:
        """On a resumed intent whose dead attempt finished its upload: hash our bytes
        instead of sending them again (which on Azure would leave a second set of blocks
        uncommitted beside the blob). The create-only put still guards the other case."""
        try:
            info = await self.store.stat(intent.blob_name)
        except BlobNotFound:
            return None
        digests = await self._digest(stream)
        if info.sha256 != digests.sha256:
            raise IdempotencyConflict("idempotency key was used with different bytes")
        return digests

    async def confirm(self, intent: Intent, name: str | None = None) -> None:
        """Before C3/R3: compare-and-set that the intent is still this attempt's, extending
        its lease (and naming a creation recorded under a placeholder). If it is not, a
        blob whose row is gone is deleted (conditioned on ``pending``) and IntentLost
        raised: a blob whose intent was swept must never be tagged committed. A connection
        lost under it is tried once more (a second run after an applied first only extends
        the lease again; the name is already the real one)."""
        confirmed, _ = await once_more_if_lost(
            lambda: self.transitions.confirm(intent, rename=name))
        if confirmed:
            return
        await self._lost(intent)

    async def inserted(self, intent: Intent, insert: Awaitable[None],
                       again: Callable[[], Awaitable[None]] | None = None) -> None:
        """C1/R1/A1 (and an upload's creation, :func:`blobledger.uploads.resumable.begin`):
        the intent's rows inserted. If the connection was lost under the insert
        (its COMMIT may have applied), the rows are looked for: found under this attempt's
        token, the intent is this attempt's and it goes on; not found, the error stands
        (rows that land late are the sweeper's), except for an insert that is one
        autocommit statement (``again``: C1 on PostgreSQL, which has no BEGIN to find a dead
        connection with). That one runs once more: the two runs insert the same unique
        keys (the document's id, the blob's name), so the server lets at most one land and
        the second waits for the first's outcome; a second run that collides is recognised
        by this attempt's token, as above."""
        try:
            await insert
            return
        except DBAPIError as exc:
            if not connection_lost(exc):
                raise
            if await self.transitions.owns(intent):
                return
            if again is None:
                raise
        try:
            await again()
        except (NameTaken, DBAPIError):
            if not await self.transitions.owns(intent):
                raise

    async def _lost(self, intent: Intent) -> NoReturn:
        """The intent was taken while this attempt was paused: delete our blob if its row is
        gone (conditioned on ``pending``), then IntentLost."""
        await self.drop_lost(intent)
        raise IntentLost(LOST)

    async def drop_lost(self, intent: Intent) -> None:
        """A writer whose intent was taken while it was paused: its blob deleted if the
        blob's row is gone (conditioned on ``pending``; a row still there is the sweeper's
        or the deletion path's to resolve). Failures are logged, not raised."""
        try:
            async with self.db.session(readonly=True) as session:
                row = await session.get(BlobRow, intent.blob_name)
            if row is None:
                await self.store.delete(intent.blob_name, if_tags=PENDING)
        except (BlobLedgerError, OSError) as exc:
            log.warning("removing the blob of lost intent %s failed (%s)", intent.blob_name,
                        type(exc).__name__)

    async def tag_committed(self, intent: Intent) -> None:
        """C3/R3/A3: tag the blob committed, conditioned on it still being pending. If that
        fails because the intent was taken meanwhile (the writer paused past its lease after
        its confirm while the sweeper removed the blob), IntentLost, not the store's error;
        a failure while the intent is still this attempt's passes through."""
        try:
            try:
                await self.store.set_tags(intent.blob_name, COMMITTED, if_tags=PENDING)
            except ConditionNotMet:
                if (await self.store.get_tags(intent.blob_name)).get(STATE_TAG) != \
                        BlobState.COMMITTED:
                    raise
        except BlobLedgerError as exc:
            if await self.transitions.owns(intent):
                raise
            raise IntentLost(LOST) from exc

    async def _fail(self, intent: Intent, exc: BaseException) -> None:
        """A live writer's failure path: compensate if the intent is still ours; if it is
        not (a sweeper or a retry took it while this attempt was paused), say so."""
        if isinstance(exc, IntentLost):
            return
        owned = await asyncio.shield(self.abandon(intent))
        if owned is False and isinstance(exc, Exception):
            raise IntentLost(LOST) from exc

    async def abandon(self, intent: Intent) -> bool | None:
        """Hand the intent to the deletion path if it is still this attempt's and delete its
        blob conditioned on ``pending``; True if it was ours, False if not, None if the
        database could not say (the sweeper resolves it)."""
        return await self._abandon(intent, None)

    async def give_up(self, intent: Intent, upload_id: str) -> bool | None:
        """:meth:`abandon` for an upload whose client lied about its bytes, only while no
        completion has verified that upload (:meth:`Transitions.abandon`)."""
        return await self._abandon(intent, upload_id)

    async def _abandon(self, intent: Intent, upload_id: str | None) -> bool | None:
        try:
            if not await self.transitions.abandon(intent, upload_id):
                return False
        except Exception as exc:
            log.warning("abandoning %s failed (%s); left to the sweeper", intent.blob_name,
                        type(exc).__name__)
            return None
        try:
            await self.store.delete(intent.blob_name, if_tags=PENDING)
            await self.transitions.remove_abandoned(intent.blob_name)
        except ConditionNotMet:
            pass  # tagged committed already: the deletion path retags and deletes it
        except Exception as exc:
            log.warning("compensating delete of %s failed (%s); left to the deletion path",
                        intent.blob_name, type(exc).__name__)
        return True

    async def _digest(self, data: Data) -> Digests:
        hasher = Hasher()
        async for chunk in limit_size(as_stream(data), self.settings.max_upload_bytes):
            await hasher.update(chunk)
        return hasher.digests()



def _deadline(seconds: float) -> float:
    """The loop-clock instant an upload started now must finish by."""
    return asyncio.get_running_loop().time() + seconds




def _plausible_id(text: str) -> bool:
    """Whether ``text`` can be an id at all (a string holding a NUL, which some databases
    refuse to compare, cannot)."""
    return len(text) <= 128 and text.isprintable()
