"""The sweeper: stale pending intents and the deletion path (the ``blobs`` outbox).

One :meth:`Sweeper.run_once` does, in claimed batches until no claimable work is left:

0. **Owed retags** (the deferred retag): :class:`blobledger.workers.retagger.Retagger`.

1. **Stale intents**: rows ``pending`` whose ``changed_at`` is older than ``sweep_after`` and
   whose lease has expired. Delete the blob conditioned on tag ``pending`` (absent is fine),
   then the rows (for a creation the pending document too, while it still points at the
   blob). A refusal means the blob is tagged ``committed`` (the writer died between C3 and
   C4): a creation rolls forward to ready with the size and checksums the store recorded, a
   replacement's row moves to ``deleting``. A stale *staged attachment* (never attached by
   an application's transaction) is never rolled forward: it is fenced first (``pending ->
   deleting`` under the claim's token, so a late A4 loses) and left to the deletion path.
   On a store whose delete cannot see the tag (S3), nothing is deleted before the decision
   is durable: the tags are read, then an absent or ``pending`` blob's row is fenced
   ``pending -> deleting`` under the claim's token (final: no writer, retry or other
   sweeper can commit it afterwards), and only then is the blob deleted.
2. **The deletion path**: rows ``deleting`` older than ``delete_grace`` whose lease has
   expired. Check that no document points at the blob, tag it ``deleting`` conditioned on
   ``committed`` (already ``deleting`` is fine), delete it conditioned on ``deleting``,
   remove the row. A row that is ``attached``, or whose owner row still holds the blob, is
   refused like one a document points at.

Every step is idempotent: a crash anywhere leaves rows that a later run claims again once
the sweeper's lease has expired. A claim replaces the row's owner token with its own and moves
``lease_until`` (a compare-and-set in :mod:`blobledger.protocol.transitions`; on PostgreSQL
``SELECT … FOR UPDATE SKIP LOCKED``), and every later step requires that token: sweepers
never handle one row twice, and a writer that was paused past its lease loses every step it
tries afterwards (it can no longer commit a blob the sweeper is deleting). Each run also
forgets idempotency keys past their retention. On SQLite only one sweeper runs at a time: it
holds ``flock`` on ``<database file>.sweep-lock``. Deletes go out through
``Store.delete_many`` (Blob Batch on Azure). Nothing here deletes a blob tagged
``committed``: a guard refusal is logged and counted, and the sweep goes on.

Failpoints (see :mod:`blobledger.failpoints`): ``sweep.after_claim``, ``sweep.after_fence``
(S3), ``sweep.after_delete``, ``sweep.after_remove`` (rows removed, the late delete not
sent), ``sweep.before_resolve``, ``deletion.after_claim``, ``deletion.after_tag``,
``deletion.after_delete``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from sqlalchemy.exc import SQLAlchemyError

from blobledger import failpoints, telemetry
from blobledger._base import metrics
from blobledger.errors import (
    BlobLedgerError,
    ConditionNotMet,
    Digests,
    StoreUnavailable,
    SweeperBusy,
)
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import PENDING_TAG as PENDING
from blobledger.protocol.models import BlobKind, BlobState
from blobledger.workers.retagger import Retagger
from blobledger.workers.supervisor import Worker
from blobledger.workers.sweeper.batches import (
    CONCURRENCY,
    SweepReport,
    _Claim,
    _Claimed,
    _gather,
    _stat_or_error,
    _tags_or_none,
    log,
)
from blobledger.workers.sweeper.deletion import DeletionPath

#: how long a claimed row belongs to the sweeper that claimed it
SWEEP_LEASE = 300.0
#: claimed batches worked at once by one sweeper
PARALLEL = 4

#: the span (and log event) of one batch of each state
SPANS = {BlobState.PENDING: "sweep.batch", BlobState.DELETING: "deletion.batch"}


class Sweeper(DeletionPath):
    """Resolves stale intents and runs the deletion path, in claimed batches."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        batch: int = 256,
        owner: str | None = None,
        lease: float = SWEEP_LEASE,
        max_batches: int | None = None,
        parallel: int = PARALLEL,
        lock_wait: float = 0.0,
    ) -> None:
        """``lock_wait``: on SQLite, how long a run waits for another process's run to end
        (and release the one-sweeper lock) before it raises SweeperBusy."""
        if batch < 1 or parallel < 1:
            raise ValueError("batch and parallel must be at least 1")
        self.ledger = ledger
        self.batch = batch
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.lease = lease
        self.max_batches = max_batches
        self.parallel = parallel
        self.lock_wait = lock_wait
        self._lock_fd: int | None = None

    # -- the one-sweeper rule on SQLite -----------------------------------------------------
    def lock_path(self) -> str | None:
        """The lock file next to a SQLite database (None on PostgreSQL or in memory)."""
        db = self.ledger.db
        if not db.is_sqlite:
            return None
        database = db.engine.url.database
        if not database or database == ":memory:":
            return None
        return os.path.abspath(os.path.expanduser(database)) + ".sweep-lock"

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold the SQLite sweep lock for the block (re-entrant; a no-op on PostgreSQL)."""
        path = self.lock_path()
        if path is None or self._lock_fd is not None:
            yield
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
        deadline = time.monotonic() + self.lock_wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:  # another process's run may end meanwhile
                    await asyncio.sleep(0.05)
                    continue
            os.close(fd)
            raise SweeperBusy(
                f"another sweeper is running on this SQLite database (lock {path}); "
                "SQLite allows one sweeper at a time") from None
        self._lock_fd = fd
        try:
            yield
        finally:
            self._lock_fd = None
            os.close(fd)  # releases the flock

    # -- one run --------------------------------------------------------------------------
    async def run_once(self) -> SweepReport:
        """Sweep stale intents, then run the deletion path; one summary per run."""
        report = SweepReport()
        started = time.perf_counter()
        try:
            async with self.exclusive():
                retags = await Retagger(self.ledger, batch=self.batch).run_once()
                report.retagged = retags.retagged
                report.errors += retags.errors
                await self._drain(BlobState.PENDING, self._sweep_batch, report)
                if report.aborted is None:
                    await self._drain(BlobState.DELETING, self._delete_batch, report)
                report.keys_expired = await self.ledger.transitions.purge_keys()
        finally:
            report.seconds = time.perf_counter() - started
            metrics.record_sweep(report)
        log.info("%s", report.to_log())
        return report

    async def _drain(
        self,
        state: BlobState,
        work: Callable[[_Claim, SweepReport], Awaitable[None]],
        report: SweepReport,
    ) -> None:
        """Claim and work batches until none is left, ``parallel`` batches in flight (the
        storage works on one batch while the next is prepared)."""

        async def worker() -> None:
            while report.aborted is None and (
                    self.max_batches is None or report.batches < self.max_batches):
                claim = await self._claim(state)
                if not claim.rows:
                    return
                report.batches += 1
                report.claimed += len(claim.rows)
                try:
                    with telemetry.span(SPANS[state], rows=len(claim.rows)):
                        await work(claim, report)
                except StoreUnavailable as exc:
                    report.errors += 1
                    report.aborted = str(exc)
                    log.warning("sweep stopped: %s (claimed rows are retried after the lease)",
                                exc)
                    return
                if len(claim.rows) < self.batch:
                    return

        await asyncio.gather(*(worker() for _ in range(self.parallel)))

    async def _claim(self, state: BlobState) -> _Claim:
        """Claim up to ``batch`` claimable rows in ``state``: the claim's token replaces the
        owner's, so a writer that was paused loses every later step on these rows."""
        settings = self.ledger.settings
        age = settings.sweep_after if state == BlobState.PENDING else settings.delete_grace
        token, rows = await self.ledger.transitions.claim(state, age, self.batch, self.lease)
        return _Claim([_Claimed(r.name, r.document_id, r.kind) for r in rows], token)

    # -- stale intents --------------------------------------------------------------------
    async def _sweep_batch(self, claim: _Claim, report: SweepReport) -> None:
        await failpoints.hit("sweep.after_claim")
        staged = [r.name for r in claim.rows if r.kind == BlobKind.ATTACHMENT]
        if staged:  # fenced before any storage call; never rolled forward
            handles = await self.ledger.transitions.staged_handles(staged)  # tus uploads'
            report.fenced += await self.ledger.transitions.hand_to_deletion(claim.token, staged)
            await self._abort_parts(handles, report)
        rows = [r for r in claim.rows if r.kind != BlobKind.ATTACHMENT]
        if not rows:
            return
        if not self.ledger.store.capabilities.state_conditioned_delete:
            await self._sweep_fenced(rows, claim.token, report)
            return
        outcomes = await self.ledger.store.delete_many([(r.name, PENDING) for r in rows])
        gone: list[_Claimed] = []
        refused: list[_Claimed] = []
        for row, outcome in zip(rows, outcomes, strict=True):
            if outcome.error is None:
                gone.append(row)
                report.absent += not outcome.deleted
            elif isinstance(outcome.error, ConditionNotMet):
                refused.append(row)
            else:
                report.errors += 1
                log.warning("sweep: delete of %s failed: %s", row.name, outcome.error)
        await failpoints.hit("sweep.after_delete")
        if gone:
            await self._drop_staged([r.name for r in gone], report)
            removed = await self.ledger.transitions.remove_swept(
                claim.token, [r.name for r in gone])
            if len(removed) != len(gone):
                log.warning("sweep: %d intents changed owner before their rows were removed",
                            len(gone) - len(removed))
            report.swept += len(removed)
            await self._delete_late(removed, report)
        if refused:
            await failpoints.hit("sweep.before_resolve")
            await self._resolve_refused(refused, claim.token, report)

    async def _sweep_fenced(
        self, rows: Sequence[_Claimed], token: str, report: SweepReport
    ) -> None:
        """Stale intents on a store whose delete cannot see the ``state`` tag (S3: ETag
        only): the tags are read first and the decision made in the database before any
        delete. Absent or ``pending``: the row is fenced ``pending -> deleting`` under the
        claim's token, then the blob deleted and the row removed (a blob retagged meanwhile
        by a writer that woke is refused and left to the deletion path: its row is
        ``deleting`` for good). ``committed``: resolved as a refused delete is."""
        store = self.ledger.store
        tags = await _gather(CONCURRENCY, [_tags_or_none(store.get_tags, r.name) for r in rows])
        doomed: list[_Claimed] = []
        others: list[tuple[_Claimed, str]] = []
        for row, tag in zip(rows, tags, strict=True):
            if tag is None or tag == BlobState.PENDING:
                doomed.append(row)
            else:
                others.append((row, tag))
        if doomed:
            handles = await self.ledger.transitions.staged_handles([r.name for r in doomed])
            fenced = set(await self.ledger.transitions.fence_swept(
                token, [r.name for r in doomed]))
            if len(fenced) != len(doomed):
                log.warning("sweep: %d intents changed owner before they were fenced",
                            len(doomed) - len(fenced))
            await failpoints.hit("sweep.after_fence")
            await self._abort_parts({n: h for n, h in handles.items() if n in fenced}, report)
            done: list[str] = []
            if fenced:
                for outcome in await store.delete_many([(n, PENDING) for n in fenced]):
                    if outcome.error is None:
                        done.append(outcome.name)
                        report.absent += not outcome.deleted
                    elif not isinstance(outcome.error, ConditionNotMet):
                        report.errors += 1
                        log.warning("sweep: delete of %s failed: %s", outcome.name,
                                    outcome.error)
            await failpoints.hit("sweep.after_delete")
            removed = await self.ledger.transitions.remove_deleted(token, done) if done else []
            report.swept += len(removed)
            # fenced but not deleted (retagged since, or failed): the deletion path's now
            report.moved_to_deleting += len(fenced) - len(removed)
            await self._delete_late(removed, report)
        if others:
            await failpoints.hit("sweep.before_resolve")
            await self._resolve_refused([r for r, _ in others], token, report,
                                        tags=[tag for _, tag in others])

    async def _drop_staged(self, names: Sequence[str], report: SweepReport) -> None:
        """The uncommitted parts of swept resumable uploads (best effort: what a failure
        leaves, the reconciler reports and ``--fix`` clears)."""
        await self._abort_parts(await self.ledger.transitions.staged_handles(names), report)

    async def _abort_parts(self, handles: dict[str, str], report: SweepReport) -> None:
        for name, handle in handles.items():
            try:
                await self.ledger.store.abort_staged(name, handle)
            except BlobLedgerError as exc:
                report.errors += 1
                log.warning("sweep: dropping the parts of %s failed: %s", name, exc)

    async def _resolve_refused(
        self, rows: Sequence[_Claimed], token: str, report: SweepReport,
        tags: Sequence[str | None] | None = None,
    ) -> None:
        """The blob is not tagged pending: roll a committed creation forward, hand a
        committed replacement to the deletion path, refuse anything else. ``tags``: each
        row's ``state`` tag as read since the claim (read here if not given)."""
        if tags is None:
            store = self.ledger.store
            tags = await _gather(CONCURRENCY, [_tags_or_none(store.get_tags, r.name)
                                               for r in rows])
        committed = []
        untagged = []
        for row, tag in zip(rows, tags, strict=True):
            if tag == BlobState.COMMITTED:
                committed.append(row)
            elif tag == "":  # an Azure direct upload's, created untagged: counts as pending
                untagged.append(row.name)
            elif tag is None:
                report.errors += 1  # vanished since the refusal: the next run sees it absent
                log.warning("sweep: %s vanished after refusing its delete", row.name)
            else:
                report.refused += 1
                log.error("sweep guard: pending row %s has a blob tagged %r; left alone",
                          row.name, tag)
        if untagged:
            # The store's delete conditioned on pending refused it: the decision is made
            # in the database first (pending -> deleting under this claim), and the
            # deletion path tags the blob deleting and deletes it.
            fenced = await self.ledger.transitions.fence_swept(token, untagged,
                                                               keep_claim=False)
            report.moved_to_deleting += len(fenced)
        creations = [r for r in committed if r.kind == BlobKind.CREATE]
        replacements = [r.name for r in committed if r.kind != BlobKind.CREATE]
        if creations:
            # An upload's blob is rolled forward only if the service verified its bytes
            # before C3 (a direct-upload client that tagged its own blob committed has not).
            verified = await self.ledger.transitions.unverified([r.name for r in creations])
            unverified = [r.name for r in creations
                          if r.name in verified and verified[r.name] is None]
            creations = [r for r in creations if r.name not in unverified]
            if unverified:
                report.moved_to_deleting += await self.ledger.transitions.discard_unverified(
                    token, unverified)
        if creations:
            await self._roll_forward(creations, token, report)
        if replacements:
            moved = await self.ledger.transitions.hand_to_deletion(token, replacements)
            report.moved_to_deleting += moved

    async def _roll_forward(
        self, rows: Sequence[_Claimed], token: str, report: SweepReport
    ) -> None:
        """C4 on behalf of a writer that stopped after C3: the bytes are complete and
        committed (a writer that wakes later finds this document and returns it)."""
        infos = await _gather(CONCURRENCY, [_stat_or_error(self.ledger.store.stat, r.name)
                                            for r in rows])
        for row, info in zip(rows, infos, strict=True):
            if isinstance(info, BaseException) or info.sha256 is None or info.md5 is None:
                report.errors += 1
                log.warning("sweep: cannot roll %s forward: %s", row.name,
                            info if isinstance(info, BaseException) else "no checksums")
                continue
            outcome = await self.ledger.transitions.roll_forward(
                token, row.name, Digests(size=info.size, md5=info.md5, sha256=info.sha256))
            if outcome == "ready":
                report.rolled_forward += 1
            elif outcome == "deleting":
                report.moved_to_deleting += 1


async def sweep_forever(
    ledger: Ledger,
    *,
    interval: float,
    batch: int,
    stop: asyncio.Event,
    wait_for_lock: bool = False,
    on_report: Callable[[SweepReport], None] | None = None,
    on_idle: Callable[[], None] | None = None,
) -> None:
    """Run the sweeper every ``interval`` seconds until ``stop`` is set.

    Failures of one run are logged and the loop goes on (``on_report`` is called after each
    run that completed). A second sweeper on SQLite raises SweeperBusy, unless
    ``wait_for_lock`` (inside ``serve``: another process sweeps, this one retries each
    interval, calling ``on_idle`` each time it finds the lock taken; it holds the lock for
    each run only, so that another process's run fits between two of its own).
    """
    sweeper = Sweeper(ledger, batch=batch)
    busy_logged = False
    while not stop.is_set():
        try:
            async with sweeper.exclusive():
                busy_logged = False
                while not stop.is_set():
                    report = await _run_logged(sweeper)
                    if report is not None and on_report is not None:
                        on_report(report)
                    if wait_for_lock:  # serve holds the lock for a run only: an operator's
                        break          # `blobledger sweep --once` may run between two
                    if await _wait(stop, interval):
                        return
        except SweeperBusy as exc:
            if not wait_for_lock:
                raise
            if not busy_logged:
                log.info("background sweep idle: %s", exc)
                busy_logged = True
            if on_idle is not None:
                on_idle()
        if await _wait(stop, interval):
            return


async def _run_logged(sweeper: Sweeper) -> SweepReport | None:
    try:
        return await sweeper.run_once()
    except SweeperBusy:
        raise
    except (BlobLedgerError, SQLAlchemyError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        log.warning("sweep failed: %s: %s", type(exc).__name__, first)
        metrics.SWEEP_FAILURES.inc()
        return None


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to ``seconds``; True if ``stop`` was set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True


def _rowcount(result: object) -> int:
    return int(getattr(result, "rowcount", 0))


SWEEP_INTERVAL_ENV = "BLOBLEDGER_SWEEP_INTERVAL"


def background_sweeper(interval: float | None, *, batch: int = 256) -> Worker | None:
    """A worker for ``serve`` sweeping every ``interval`` seconds (None or 0: no worker).

    On SQLite, where one sweeper is allowed, an instance that finds the lock taken stays
    idle and tries again each interval (a well worker: another process sweeps).
    """
    if not interval:
        return None
    period = interval

    async def sweeper(ledger: Ledger, beat: Callable[[], None]) -> None:
        await sweep_forever(ledger, interval=period, batch=batch, stop=asyncio.Event(),
                            wait_for_lock=True, on_report=lambda _: beat(), on_idle=beat)

    return Worker("sweeper", period, sweeper)


__all__ = ["PARALLEL", "SWEEP_INTERVAL_ENV", "SWEEP_LEASE", "SweepReport", "Sweeper",
           "background_sweeper", "sweep_forever"]
