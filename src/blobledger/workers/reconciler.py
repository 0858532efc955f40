"""The reconciler: a streaming merge of the container listing with the ``blobs`` table.

Both sides arrive in code point order of the blob name (the store's listing; the table read
in keyset pages ordered ``COLLATE "C"`` on PostgreSQL, binary on SQLite), so memory stays
bounded whatever the container holds. Findings:

- ``orphan``: a blob with no row (outside the protocol, or a row removed before its blob);
- ``missing``: a row whose blob is absent; ``missing_ready`` when a ready document points
  at it or the row is an ``attached`` attachment (a bug: exit code 2);
- ``mismatch``: the blob's ``state`` tag disagrees with its row past the step's cutoff (an
  ``attached`` row's blob is tagged ``committed``);
- ``uncommitted``: bytes uploaded under a name but never committed, older than the deadline
  (a resumable upload's parts count as in flight until the upload expires; an abandoned
  upload's are reported, and ``--fix`` clears them once no row refers to the name).

Anything younger than its cutoff (an upload in flight) is counted as ``in_flight``, not
reported. A row in ``deleting`` whose blob is still there, tagged ``committed`` or
``deleting``, is counted as ``awaiting_deletion``, not reported: the deletion path removes
it after ``BLOBLEDGER_DELETE_GRACE``, at the sweeper's next run (``serve`` sweeps every
``BLOBLEDGER_SWEEP_INTERVAL``; ``blobledger sweep`` does it now). Before an orphan or a
missing ready blob is reported, the row is read again: the listing and the pages are not one
snapshot. ``fix`` deletes only orphans older than ``older_than`` that are tagged ``pending``
or ``deleting`` (conditioned on that tag) or carry no ``state`` tag at all (conditioned on
the ETag listed: bytes a direct upload's client put after its intent was swept, which the
create-only URL cannot tag on Azure), never one tagged ``committed``, and clears uncommitted
bytes the store can clear without touching a committed blob. On SQLite an orphan's re-read
and delete hold the database's write lock (a row inserted by a transaction still open is
seen once it commits). ``fix`` also retags ``committed`` (conditioned on ``pending``) the
blob of an ``attached`` row still tagged ``pending`` (Django on SQLite tags after its
commit, docs/django.md) and the blob of a ready document still tagged ``pending`` (the
deferred retag's C3/R3 owed), each only after the row is read again and still says so
(:meth:`_Merge.retag_if_still`).

A name that a row still refers to is never cleaned as garbage: right before each delete or
discard, the row is read again, and a name that has one (now) is left alone (``kept``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.exc import DBAPIError

from blobledger import failpoints
from blobledger._base import metrics
from blobledger._base.aio import prefetch
from blobledger._base.durations import format_duration
from blobledger.config import minimum_sweep_after
from blobledger.errors import BlobNotFound, ConditionNotMet, ConfigError, StoreError
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import (
    COMMITTED_TAG,
    PENDING_TAG,
    STATE_TAG,
    BlobRow,
    BlobState,
    DocumentRow,
    DocumentStatus,
    as_utc,
)
from blobledger.stores.base import BlobInfo, Condition
from blobledger.workers.scan import merged, pages, tagged

log = logging.getLogger("blobledger.reconciler")

PAGE = 500
AHEAD = 256  # items each side may stream ahead of the merge
#: findings kept in the report (the rest are counted, and streamed to ``on_finding``)
SAMPLE = 100
FIXABLE = (BlobState.PENDING.value, BlobState.DELETING.value)


@dataclass(frozen=True)
class Finding:
    category: str  # orphan | missing | missing_ready | mismatch | uncommitted
    name: str
    detail: str
    row_state: str | None = None
    tag_state: str | None = None
    age_seconds: float | None = None
    fixed: bool = False

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        if self.age_seconds is not None:
            data["age_seconds"] = round(self.age_seconds, 1)
        return data


@dataclass
class ReconcileReport:
    """Counts per category, the first findings, and what ``fix`` did."""

    blobs: int = 0
    rows: int = 0
    orphan: int = 0
    missing: int = 0
    missing_ready: int = 0
    mismatch: int = 0
    uncommitted: int = 0
    in_flight: int = 0
    #: rows in ``deleting`` whose blob the deletion path has not removed yet (not findings)
    awaiting_deletion: int = 0
    fixed: int = 0
    refused: int = 0
    kept: int = 0  # fixes skipped because a row refers to the name by the time of the fix
    errors: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    def count(self, category: str) -> int:
        return int(getattr(self, category))

    @property
    def total(self) -> int:
        return self.orphan + self.missing + self.missing_ready + self.mismatch + self.uncommitted

    @property
    def exit_code(self) -> int:
        """0 clean, 1 findings, 2 a ready document's blob is missing."""
        if self.missing_ready:
            return 2
        return 1 if self.total or self.errors else 0

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        del data["findings"]
        data["seconds"] = round(self.seconds, 3)
        data["findings_total"] = self.total
        data["exit_code"] = self.exit_code
        return data

    def to_log(self) -> str:
        return json.dumps({"event": "reconcile", **self.as_dict()})


@dataclass(frozen=True)
class _Row:
    name: str
    state: str
    changed_at: datetime
    ready: bool  # a ready document points at this blob


class _Merge:
    def __init__(
        self, ledger: Ledger, *, fix: bool, older_than: float,
        on_finding: Callable[[Finding], None] | None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.on_progress = on_progress
        self.fix = fix
        self.older_than = older_than
        self.on_finding = on_finding
        self.report = ReconcileReport()
        self.now: datetime  # the database's clock, read when the run starts
        settings = ledger.settings
        self.cutoff = {
            BlobState.PENDING.value: settings.sweep_after,
            BlobState.DELETING.value: settings.delete_grace,
            BlobState.COMMITTED.value: 0.0,
            BlobState.ATTACHED.value: 0.0,
        }

    def found(self, finding: Finding) -> None:
        setattr(self.report, finding.category, self.report.count(finding.category) + 1)
        if len(self.report.findings) < SAMPLE:
            self.report.findings.append(finding)
        if self.on_finding is not None:
            self.on_finding(finding)

    def age(self, when: datetime | None) -> float | None:
        return None if when is None else (self.now - as_utc(when)).total_seconds()

    def past_cutoff(self, row: _Row) -> bool:
        age = self.age(row.changed_at) or 0.0
        return age > self.cutoff.get(row.state, 0.0)

    async def run(self, prefix: str, *, blocks: bool) -> ReconcileReport:
        self.now = as_utc(await self.ledger.now())  # ages on the one clock, as the sweeper's
        # Both sides stream ahead in the background, a page or so each, in bounded memory.
        rows = prefetch(_rows(self.ledger, prefix), AHEAD)
        blobs = prefetch(self.ledger.store.list(prefix, tags=True, checksums=False), AHEAD)
        steps = 0
        async for row, blob in merged(rows, blobs, lambda r: r.name):
            steps += 1
            if self.on_progress is not None and steps % PAGE == 0:
                self.on_progress(self.report.rows, self.report.blobs)
            if row is None:
                assert blob is not None
                self.report.blobs += 1
                await self.orphan(blob)
            elif blob is None:
                self.report.rows += 1
                await self.missing(row)
            else:
                self.report.blobs += 1
                self.report.rows += 1
                await self.compare(row, blob)
        if self.on_progress is not None:
            self.on_progress(self.report.rows, self.report.blobs)
        if blocks:
            await self.uncommitted(prefix)
        return self.report

    async def orphan(self, blob: BlobInfo) -> None:
        if await _row_state(self.ledger, blob.name) is not None:
            self.report.in_flight += 1  # its row appeared after the page was read
            return
        tag = (blob.tags or {}).get(STATE_TAG)
        untagged = blob.tags is not None and tag is None
        age = self.age(blob.last_modified)
        fixed = False
        if self.fix and (tag in FIXABLE or untagged) and age is not None \
                and age > self.older_than:
            # tagged: conditioned on that tag; untagged (a direct upload's client wrote it
            # after its intent was swept): on the ETag listed, so only the bytes seen go
            fixed = await self.delete_orphan(
                blob.name, Condition(etag=blob.etag) if untagged else
                Condition(tags={STATE_TAG: str(tag)}))
        self.found(Finding("orphan", blob.name, f"blob without a row, {tagged(tag)}",
                           tag_state=tag, age_seconds=age, fixed=fixed))

    async def still_unreferenced(self, name: str) -> bool:
        """Re-read the row right before a destructive act: a name with a row is not garbage."""
        if await _row_state(self.ledger, name) is None:
            return True
        self.report.kept += 1
        log.info("reconcile: %s has a row now; left alone", name)
        return False

    async def delete_orphan(self, name: str, condition: Condition) -> bool:
        """Delete an orphan under ``condition`` (its tag, or the ETag listed), unless a row
        refers to the name by now. On SQLite the re-read and the delete hold the database's
        write lock: a transaction that inserted the name's row and has not committed yet
        (Django's staging inside its transaction) ends first, so its row is seen."""
        try:
            async with self.writers_done():
                if not await self.still_unreferenced(name):
                    return False
                if condition.etag is not None:
                    await self.ledger.store.delete(name, if_etag=condition.etag)
                else:
                    assert condition.tags is not None
                    await self.ledger.store.delete(name, if_tags=condition.tags)
        except ConditionNotMet:
            self.report.refused += 1
            log.warning("reconcile: the guard refused to delete orphan %s", name)
            return False
        except (StoreError, DBAPIError) as exc:
            self.report.errors += 1
            log.warning("reconcile: deleting orphan %s failed: %s", name, exc)
            return False
        self.report.fixed += 1
        return True

    @contextlib.asynccontextmanager
    async def writers_done(self) -> AsyncIterator[None]:
        """On SQLite, the database's write lock held (``BEGIN IMMEDIATE``: it waits for the
        one writer's transaction to end); elsewhere nothing (every writer commits its row
        before the first byte of its blob)."""
        if not self.ledger.db.is_sqlite:
            yield
            return
        async with self.ledger.db.transaction():
            yield

    async def missing(self, row: _Row) -> None:
        if row.ready or row.state in _LIVE:
            current = await _row_state(self.ledger, row.name)  # re-read: not one snapshot
            if current is None or current[0] not in _LIVE:
                self.report.in_flight += 1
                return
            try:
                await self.ledger.store.stat(row.name)
                self.report.in_flight += 1  # listed before it was committed
                return
            except BlobNotFound:
                pass
            if current[1] or current[0] == BlobState.ATTACHED:
                self.found(Finding("missing_ready", row.name,
                                   "the blob of a ready document is missing" if current[1]
                                   else "the blob of an attachment is missing",
                                   row_state=row.state, age_seconds=self.age(row.changed_at)))
                return
        elif not self.past_cutoff(row) or await self.ledger.transitions.upload_live(row.name):
            self.report.in_flight += 1  # (a resumable or direct upload lives until it expires)
            return
        self.found(Finding("missing", row.name, f"row {row.state!r} whose blob is absent",
                           row_state=row.state, age_seconds=self.age(row.changed_at)))

    async def compare(self, row: _Row, blob: BlobInfo) -> None:
        tag = (blob.tags or {}).get("state")
        if row.state == BlobState.DELETING and tag in (BlobState.COMMITTED, BlobState.DELETING):
            self.report.awaiting_deletion += 1  # the deletion path's, after the grace
            return
        if tag == row.state or (row.state == BlobState.ATTACHED and tag == BlobState.COMMITTED):
            return
        if row.state not in _LIVE and not self.past_cutoff(row):
            self.report.in_flight += 1
            return
        fixed = False
        if self.fix and row.state == BlobState.ATTACHED and tag == BlobState.PENDING:
            fixed = await self.retag_attached(row.name)
        elif self.fix and row.state == BlobState.COMMITTED and row.ready \
                and tag == BlobState.PENDING:
            fixed = await self.retag_ready(row.name)
        self.found(Finding("mismatch", row.name, f"row {row.state!r}, blob {tagged(tag)}",
                           row_state=row.state, tag_state=tag,
                           age_seconds=self.age(row.changed_at), fixed=fixed))

    async def retag_attached(self, name: str) -> bool:
        """An attached row whose blob is still tagged ``pending`` (Django on SQLite: the
        process died between its commit and A3): retag ``committed``, conditioned on
        ``pending``, if the row is still attached. Its commit decided it; tags only go
        forward."""
        return await self.retag_if_still(
            name, lambda state, _ready: state == BlobState.ATTACHED.value)

    async def retag_ready(self, name: str) -> bool:
        """A ready document's blob still tagged ``pending`` (the deferred retag: C4/R4
        committed, the retag owed and not done, or its worker dead): retag ``committed``,
        conditioned on ``pending``, if the row is still committed and a ready document still
        points at it. A row that moved on since the listing (the document replaced or
        deleted: its row ``deleting``) keeps its ``pending`` tag for the deletion path."""
        return await self.retag_if_still(
            name, lambda state, ready: state == BlobState.COMMITTED.value and ready)

    async def retag_if_still(self, name: str, still: Callable[[str, bool], bool]) -> bool:
        """Retag ``name`` ``committed`` conditioned on ``pending``, only if its row, read
        again now (the listing and the pages are not one snapshot), ``still`` says so."""
        current = await _row_state(self.ledger, name)
        if current is None or not still(*current):
            return False
        await failpoints.hit("reconcile.before_retag")
        try:
            await self.ledger.store.set_tags(name, COMMITTED_TAG, if_tags=PENDING_TAG)
        except ConditionNotMet:
            self.report.refused += 1
            return False
        except StoreError as exc:
            self.report.errors += 1
            log.warning("reconcile: retagging %s failed: %s", name, exc)
            return False
        self.report.fixed += 1
        return True

    async def uncommitted(self, prefix: str) -> None:
        deadline = self.ledger.settings.upload_deadline
        async for info in self.ledger.store.list_uncommitted(prefix):
            age = self.age(info.last_modified)
            if (age is not None and age <= deadline) or \
                    await self.ledger.transitions.upload_live(info.name):
                self.report.in_flight += 1  # (a resumable upload's parts live until it expires)
                continue
            fixed = False
            if self.fix and age is not None and age > self.older_than:
                fixed = await self.discard(info.name)
            self.found(Finding(
                "uncommitted", info.name,
                f"{info.blocks} uncommitted block(s), {info.size} bytes"
                + (" beside a committed blob" if info.committed else ""),
                age_seconds=age, fixed=fixed))

    async def discard(self, name: str) -> bool:
        """Clear leftover uncommitted bytes (the store never touches a committed blob; on
        Azure, blocks beside a committed blob stay until the service drops them). Bytes under
        a pending intent belong to it (a retry may resume it): kept. Under any other row
        (committed, deleting, attached) nothing can resume them: cleared."""
        state = await _row_state(self.ledger, name)
        if state is not None and state[0] == BlobState.PENDING.value:
            self.report.kept += 1
            log.info("reconcile: %s belongs to a pending intent; its bytes are kept", name)
            return False
        try:
            cleared = await self.ledger.store.discard_uncommitted(name)
        except StoreError as exc:
            self.report.errors += 1
            log.warning("reconcile: discarding uncommitted bytes of %s failed: %s", name, exc)
            return False
        if not cleared:  # nothing left, or a blob committed under the name refused it
            return False
        remaining = [u async for u in self.ledger.store.list_uncommitted(name)
                     if u.name == name]
        if remaining:
            return False
        self.report.fixed += 1
        return True


async def reconcile(
    ledger: Ledger,
    *,
    fix: bool,
    older_than: float,
    prefix: str | None = None,
    on_finding: Callable[[Finding], None] | None = None,
    blocks: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReconcileReport:
    """Compare the store with the ``blobs`` table under the blob prefix; see the module doc.

    ``blocks=False`` skips the uncommitted-blocks check (on Azure the store reads one block
    list per listed blob for it, which costs far more than the merge itself).
    ``on_progress(rows, blobs)`` is told the counts scanned every :data:`PAGE` steps.

    ``older_than`` (seconds) is the age an orphan must pass before ``fix`` deletes it; it
    may not be shorter than the upload deadline (an upload in flight is not an orphan).
    """
    deadline = ledger.settings.upload_deadline
    if older_than < deadline:
        raise ConfigError(
            f"--older-than {format_duration(older_than)} is shorter than the upload deadline "
            f"({format_duration(deadline)}); use at least "
            f"{format_duration(minimum_sweep_after(deadline))}")
    started = time.perf_counter()
    merge = _Merge(ledger, fix=fix, older_than=older_than, on_finding=on_finding,
                   on_progress=on_progress)
    report = await merge.run(ledger.settings.blob_prefix + "/" if prefix is None else prefix,
                             blocks=blocks)
    report.seconds = time.perf_counter() - started
    metrics.record_reconcile(report)
    log.info("%s", report.to_log())
    return report


def _ready() -> Any:
    """Whether a ready document points at the row's blob (1, else 0 or NULL), probed through
    ``documents.blob_name`` alone. (An EXISTS on blob name *and* status let PostgreSQL, with
    no statistics yet on a freshly filled table, bitmap-AND the status index, reading every
    ready document once per row: 2.8 ms a row on 20,000 documents.)"""
    return (select(func.max(case((DocumentRow.status == DocumentStatus.READY, 1), else_=0)))
            .where(DocumentRow.blob_name == BlobRow.name).scalar_subquery())


async def _rows(ledger: Ledger, prefix: str) -> AsyncIterator[_Row]:
    """Every blob row under ``prefix`` in code point order, in keyset pages."""
    query = select(BlobRow.name, BlobRow.state, BlobRow.changed_at, _ready().label("ready"))
    if prefix:
        query = query.where(BlobRow.name.startswith(prefix, autoescape=True))
    async for name, state, changed, is_ready in pages(ledger, query, span="reconcile.page",
                                                      page=PAGE):
        yield _Row(name, state, changed, bool(is_ready))


#: row states whose blob must be there, tagged committed (an attached row's tag is committed)
_LIVE = (BlobState.COMMITTED.value, BlobState.ATTACHED.value)


async def _row_state(ledger: Ledger, name: str) -> tuple[str, bool] | None:
    """The row's state now and whether a ready document points at it (None: no row)."""
    async with ledger.db.session(readonly=True) as session:
        found = (await session.execute(
            select(BlobRow.state, _ready()).where(BlobRow.name == name))).first()
    return None if found is None else (str(found[0]), bool(found[1]))


async def count_rows(ledger: Ledger, prefix: str) -> int:
    """How many blob rows lie under ``prefix`` (the total a progress bar counts towards)."""
    query = select(func.count()).select_from(BlobRow)
    if prefix:
        query = query.where(BlobRow.name.startswith(prefix, autoescape=True))
    async with ledger.db.session(readonly=True) as session:
        return int(await session.scalar(query) or 0)
