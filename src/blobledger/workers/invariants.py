"""The invariant checker: I1, I3, I4 and I5 of the protocol on a live database and store.

- I1 every ``ready`` document's current blob exists, is tagged ``committed`` (or, with the
  deferred retag, still ``pending`` or untagged while its row owes the retag), and its size
  and SHA-256 match the row (this also shows I3: no such blob was deleted); so does every
  ``held`` document's (committed and stored, waiting for its processors).
- I4 (``settled=True``, after the sweeper and the deletion path ran past their cutoffs):
  no stale ``pending`` or ``deleting`` row, no committed row that no ready document points
  at, no retag still owed (the sweeper does them first), and no blob without a row.
- I5 no ``pending`` or ``held`` document is visible through :meth:`Ledger.get` or
  :meth:`Ledger.list`.

The age of the oldest owed retag is reported (``retag_lag``), with a warning (never a
violation) beyond ``BLOBLEDGER_RETAG_WARN_AFTER``.

For attachments (blob rows of kind ``attachment``, owned by an application's row):

- I1/I3 every ``attached`` blob exists, is tagged ``committed``, its size and SHA-256 match
  its row, and its owner row still holds it (nothing attached is deleted, or left attached,
  while its owner points elsewhere; a variant's owner is its document version, which must
  still exist);
- I4 (settled) nothing staged outlives the sweep cutoff: a ``pending`` attachment row older
  than ``sweep_after`` is reported like any stale intent.

I2 (write-once names) is a property of the stores' create-only put and is shown by their
conformance suite; the soak shows it end to end by re-reading every acknowledged write.

Memory is bounded: the container listing (lexical order) is merged with the ``blobs`` rows
read in keyset pages ordered by name. On a database that is changing, a suspected violation
is re-read on its own before it is reported, so a write that raced the scan is not reported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.orm import aliased

from blobledger.errors import BlobNotFound, NotFound
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow, DocumentStatus
from blobledger.protocol.owners import Owner, owner_holds
from blobledger.protocol.variant_owner import is_variant, version_alive
from blobledger.stores.base import BlobInfo
from blobledger.workers.scan import merged, pages, tagged

PAGE = 500
#: the documents whose current blob must be stored and committed (I1)
_STORED = (DocumentStatus.READY, DocumentStatus.HELD)
#: how a blob's state tag reads in a violation (``untagged`` when it has none)
TAG_STATE = "tagged state={state}"


@dataclass(frozen=True)
class Violation:
    """One broken invariant: which one, the object concerned, and what is wrong."""

    invariant: str
    subject: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"invariant": self.invariant, "subject": self.subject, "detail": self.detail}


@dataclass
class InvariantReport:
    """What a check saw and what it found wrong; ``ok`` when nothing is."""

    settled: bool = False
    ready_documents: int = 0
    pending_documents: int = 0
    blob_rows: dict[str, int] = field(default_factory=dict)
    stored_blobs: int = 0
    attached: int = 0  # attachment rows an owner holds
    orphan_blobs: int = 0  # blobs with no row (a violation only when settled)
    uncommitted: int = 0  # names holding uncommitted bytes (reported, never a violation)
    retag_lag: float = 0.0  # seconds since the oldest retag still owed (deferred retag)
    warnings: list[str] = field(default_factory=list)  # reported, never a violation
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, invariant: str, subject: str, detail: str) -> None:
        self.violations.append(Violation(invariant, subject, detail))

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "settled": self.settled,
            "ready_documents": self.ready_documents,
            "pending_documents": self.pending_documents,
            "blob_rows": dict(sorted(self.blob_rows.items())),
            "attached": self.attached,
            "stored_blobs": self.stored_blobs,
            "orphan_blobs": self.orphan_blobs,
            "uncommitted": self.uncommitted,
            "retag_lag": round(self.retag_lag, 3),
            "warnings": list(self.warnings),
            "violations": [v.to_json() for v in self.violations],
        }

    def render(self) -> str:
        rows = ", ".join(f"{n} {s}" for s, n in sorted(self.blob_rows.items())) or "none"
        lines = [
            f"documents: {self.ready_documents} ready, {self.pending_documents} pending",
            f"attachments: {self.attached} attached",
            f"blob rows: {rows}",
            f"stored blobs: {self.stored_blobs} ({self.orphan_blobs} without a row, "
            f"{self.uncommitted} names with uncommitted bytes)",
            "checked: I1 I3 I5 (documents and attachments)"
            + (" I4 (settled)" if self.settled else ""),
        ]
        lines += [f"warning: {w}" for w in self.warnings]
        if self.ok:
            lines.append("no violations")
        else:
            lines.append(f"{len(self.violations)} violation(s):")
            lines += [f"  {v.invariant} {v.subject}: {v.detail}" for v in self.violations]
        return "\n".join(lines)


@dataclass
class _Row:
    """A blob row with, if a document points at it, that document's status and digests."""

    name: str
    state: str
    document_id: str | None
    changed_at: datetime
    doc_id: str | None
    doc_status: str | None
    doc_size: int | None
    doc_sha256: str | None
    size: int | None = None
    sha256: str | None = None
    owner_table: str | None = None
    owner_key: str | None = None
    owner_column: str | None = None
    retag_due: datetime | None = None


async def check(ledger: Ledger, *, settled: bool = False,
                on_progress: Callable[[int, int], None] | None = None) -> InvariantReport:
    """Check the invariants on the ledger's database and store, streaming both;
    ``on_progress(rows, blobs)`` is told the counts scanned every :data:`PAGE` steps."""
    report = InvariantReport(settled=settled)
    steps = 0
    now = await ledger.now()  # the database's clock, which stamped every row
    prefix = ledger.settings.blob_prefix + "/"
    stale_pending = now - timedelta(seconds=ledger.settings.sweep_after)
    stale_deleting = now - timedelta(seconds=ledger.settings.delete_grace)

    stored = aiter(ledger.store.list(prefix, tags=True))
    async for row, blob in merged(_rows(ledger), stored, lambda r: r.name):
        steps += 1
        if on_progress is not None and steps % PAGE == 0:
            on_progress(sum(report.blob_rows.values()), report.stored_blobs)
        if blob is not None:
            report.stored_blobs += 1
        if row is None:
            assert blob is not None
            await _blob_without_row(ledger, report, blob)
            continue
        report.blob_rows[row.state] = report.blob_rows.get(row.state, 0) + 1
        await _row(ledger, report, row, blob, stale_pending, stale_deleting)
    if on_progress is not None:
        on_progress(sum(report.blob_rows.values()), report.stored_blobs)

    await _documents(ledger, report)
    async for _ in ledger.store.list_uncommitted(prefix):
        report.uncommitted += 1
    report.retag_lag = await ledger.transitions.retag_lag()
    if (warning := retag_warning(report.retag_lag, ledger.settings.retag_warn_after)):
        report.warnings.append(warning)
    return report


def retag_warning(lag: float, threshold: float) -> str | None:
    """The warning for an owed retag older than ``threshold`` (None: none is)."""
    if lag <= threshold:
        return None
    return (f"the oldest owed retag is {lag:.0f} s old, beyond BLOBLEDGER_RETAG_WARN_AFTER "
            f"({threshold:.0f} s): is a retag worker running (serve with "
            "BLOBLEDGER_RETAG=deferred, or blobledger sweep)? The blob is still tagged "
            "pending, which the lifecycle rule deletes once it is old enough")


async def _rows(ledger: Ledger) -> AsyncIterator[_Row]:
    """Every blob row in code-point order of its name, page by page, joined with the
    document that currently points at it (if any)."""
    doc = aliased(DocumentRow)
    query = (
        select(BlobRow.name, BlobRow.state, BlobRow.document_id, BlobRow.changed_at,
               doc.id, doc.status, doc.size, doc.sha256, BlobRow.size, BlobRow.sha256,
               BlobRow.owner_table, BlobRow.owner_key, BlobRow.owner_column,
               BlobRow.retag_due)
        .outerjoin(doc, and_(doc.blob_name == BlobRow.name)))
    async for r in pages(ledger, query, span="check.page", page=PAGE):
        yield _Row(*r)


async def _row(
    ledger: Ledger, report: InvariantReport, row: _Row, blob: BlobInfo | None,
    stale_pending: datetime, stale_deleting: datetime,
) -> None:
    if row.doc_status in _STORED:
        problem = _ready_problem(row, blob)
        if problem and (problem := await _confirm_ready(ledger, row.name)):
            report.add("I1", f"document {row.doc_id}", problem)
        return
    if row.state == BlobState.ATTACHED:
        report.attached += 1
        problem = await _attached_problem(ledger, row, blob)
        if problem and (problem := await _confirm_attached(ledger, row.name)):
            report.add("I1", f"attachment {row.name}", problem)
        return
    if not report.settled:
        return
    if row.state == BlobState.PENDING and row.changed_at <= stale_pending:
        problem = "stale pending row left by the sweeper"
    elif row.state == BlobState.DELETING and row.changed_at <= stale_deleting:
        problem = "stale deleting row left by the deletion path"
    elif row.state == BlobState.COMMITTED and row.doc_status is None:
        problem = "committed row that no ready document points at (a leak)"
    elif row.state == BlobState.COMMITTED and row.retag_due is not None:
        problem = "retag still owed after the retag worker ran"
    else:
        return
    if await _still(ledger, row.name, row.state):
        report.add("I4", f"blob {row.name}", problem)


def known(value: object) -> str:
    """A value of a violation's text; ``unknown`` for one the row or the store lacks."""
    return "unknown" if value is None else str(value)


def _ready_problem(row: _Row, blob: BlobInfo | None) -> str | None:
    if blob is None:
        return f"current blob {row.name} is missing from the store"
    state = (blob.tags or {}).get("state")
    owed = row.retag_due is not None and row.state == BlobState.COMMITTED and (
        state == BlobState.PENDING or not blob.tags)  # deferred: the retag still to come
    if state != BlobState.COMMITTED and not owed:
        return f"current blob {row.name} is {tagged(state, TAG_STATE)}, not committed"
    if row.state != BlobState.COMMITTED:
        return f"current blob {row.name} has a {row.state} row, not committed"
    if blob.size != row.doc_size:
        return (f"current blob {row.name} holds {blob.size} bytes, the row says "
                f"{known(row.doc_size)}")
    if blob.sha256 != row.doc_sha256:
        return (f"current blob {row.name} has SHA-256 {known(blob.sha256)}, the row says "
                f"{known(row.doc_sha256)}")
    return None


async def _attached_problem(ledger: Ledger, row: _Row, blob: BlobInfo | None) -> str | None:
    owner = f"{row.owner_table} {row.owner_key}.{row.owner_column}"
    if blob is None:
        return f"attached blob (owner {owner}) is missing from the store"
    state = (blob.tags or {}).get("state")
    if state != BlobState.COMMITTED:
        return (f"attached blob (owner {owner}) is {tagged(state, TAG_STATE)}, not "
                "committed")
    if blob.size != row.size or blob.sha256 != row.sha256:
        return (f"attached blob holds {blob.size} bytes with SHA-256 {known(blob.sha256)}, "
                f"the row says {known(row.size)} and {known(row.sha256)}")
    if row.owner_table is None or row.owner_key is None or row.owner_column is None:
        return "attached row without an owner"
    holder = Owner(row.owner_table, row.owner_key, row.owner_column)
    async with ledger.db.transaction(readonly=True) as conn:
        if is_variant(holder):  # a variant is held by its document version's existence
            if not await conn.run_sync(version_alive, holder):
                return f"its document version {row.owner_key} is gone (a leaked variant)"
        elif not await conn.run_sync(owner_holds, holder, row.name):
            return f"its owner {owner} does not hold it (gone, or points elsewhere)"
    return None


async def _confirm_attached(ledger: Ledger, blob_name: str) -> str | None:
    """Re-read one attached row and its blob; the problem if it still holds."""
    async with ledger.db.session(readonly=True) as session:
        found = await session.get(BlobRow, blob_name)
    if found is None or found.state != BlobState.ATTACHED:
        return None  # detached while the scan ran
    row = _Row(found.name, found.state, found.document_id, found.changed_at, None, None,
               None, None, found.size, found.sha256, found.owner_table, found.owner_key,
               found.owner_column)
    try:
        info = await ledger.store.stat(blob_name)
        blob: BlobInfo | None = BlobInfo(
            **{**info.__dict__, "tags": await ledger.store.get_tags(blob_name)})
    except BlobNotFound:
        blob = None
    return await _attached_problem(ledger, row, blob)


async def _confirm_ready(ledger: Ledger, blob_name: str) -> str | None:
    """Re-read one ready document's blob row and blob; the problem if it still holds."""
    async with ledger.db.session(readonly=True) as session:
        found = (await session.execute(
            select(BlobRow.name, BlobRow.state, BlobRow.document_id, BlobRow.changed_at,
                   DocumentRow.id, DocumentRow.status, DocumentRow.size, DocumentRow.sha256,
                   BlobRow.size, BlobRow.sha256, BlobRow.owner_table, BlobRow.owner_key,
                   BlobRow.owner_column, BlobRow.retag_due)
            .join(DocumentRow, DocumentRow.blob_name == BlobRow.name)
            .where(BlobRow.name == blob_name))).first()
    if found is None or found[5] not in _STORED:
        return None  # replaced or deleted while the scan ran
    row = _Row(*found)
    try:
        blob: BlobInfo | None = await ledger.store.stat(blob_name)
        assert blob is not None
        blob = BlobInfo(**{**blob.__dict__, "tags": await ledger.store.get_tags(blob_name)})
    except BlobNotFound:
        blob = None
    return _ready_problem(row, blob)


async def _still(ledger: Ledger, blob_name: str, state: str) -> bool:
    async with ledger.db.session(readonly=True) as session:
        found = await session.get(BlobRow, blob_name)
        return found is not None and found.state == state


async def _blob_without_row(ledger: Ledger, report: InvariantReport, blob: BlobInfo) -> None:
    async with ledger.db.session(readonly=True) as session:
        if await session.get(BlobRow, blob.name) is not None:
            return  # its row was inserted while the scan ran
    report.orphan_blobs += 1
    if report.settled:
        state = (blob.tags or {}).get("state")
        report.add("I4", f"blob {blob.name}",
                   f"stored ({tagged(state, TAG_STATE)}) with no row")


async def _documents(ledger: Ledger, report: InvariantReport) -> None:
    """I1 for ready documents whose blob has no row at all; I5 for pending ones."""
    after: str | None = None
    while True:
        query = (select(DocumentRow.id, DocumentRow.status, DocumentRow.blob_name)
                 .outerjoin(BlobRow, BlobRow.name == DocumentRow.blob_name)
                 .add_columns(BlobRow.name)
                 .order_by(DocumentRow.id).limit(PAGE))
        if after is not None:
            query = query.where(DocumentRow.id > after)
        async with ledger.db.session(readonly=True) as session:
            page = (await session.execute(query)).all()
        for doc_id, status, blob_name, row_name in page:
            if status == DocumentStatus.READY:
                report.ready_documents += 1
                if row_name is None and await _ready_without_row(ledger, doc_id):
                    report.add("I1", f"document {doc_id}",
                               f"current blob {blob_name} has no blob row")
            else:
                report.pending_documents += 1
                await _invisible(ledger, report, doc_id)
        if len(page) < PAGE:
            break
        after = page[-1][0]
    async for doc in ledger.list():
        if doc.status != DocumentStatus.READY:
            report.add("I5", f"document {doc.id}", f"listed while {doc.status}")


async def _ready_without_row(ledger: Ledger, doc_id: str) -> bool:
    async with ledger.db.session(readonly=True) as session:
        doc = await session.get(DocumentRow, doc_id)
        if doc is None or doc.status != DocumentStatus.READY:
            return False
        return await session.get(BlobRow, doc.blob_name) is None


async def _invisible(ledger: Ledger, report: InvariantReport, doc_id: str) -> None:
    try:
        doc = await ledger.get(doc_id)
    except NotFound:
        return
    if doc.status != DocumentStatus.READY:
        report.add("I5", f"document {doc_id}", f"readable through get() while {doc.status}")
