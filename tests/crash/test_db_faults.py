"""Database faults: the connection to PostgreSQL cut at each statement of each writer step
(:mod:`tests.support.pgproxy`), including at COMMIT, before it is sent (it never applied)
and after (it applied; the writer never hears).

Each case runs a real create (under an idempotency key), replace, delete or stage through a
ledger whose database URL goes through the proxy. Then the client retries (the proxy no
longer cutting): it must get the first answer if there was one (same id, version and
checksum), or a fresh success; never a second document, and never "in progress" once the
writer has answered. Then the sweeper, the deletion path and the reconciler run with the
clock far ahead, the settled invariants must hold, and the acknowledged bytes must be
readable. In the group *the database stays away*, every statement after the cut is cut too
until the retry: the writer must answer an error, and the client's retry must still end
with one document.

SQLite has no connection to cut: these run on PostgreSQL only. The suite runs every cut on
the local disk and a share of the others (:func:`in_suite`); ``BLOBLEDGER_DB_FAULTS=all`` (which
``scripts/crash-matrix`` sets) runs every cut on local disk, Azurite and S3 (moto) in both
groups, and ``docs/crash-matrix.md``'s "Database faults" table is made from that run.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from blobledger import failpoints
from blobledger.errors import IdempotencyInProgress, NotFound, PreconditionFailed
from blobledger.protocol.attachments import StagedBlob
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobState
from blobledger.workers.invariants import check
from tests.crash.child import chunks, payload, sha256
from tests.crash.conftest import make_target
from tests.crash.harness import LEASE_EXPIRED, RESOLVE_AT, describe, read_all, settle
from tests.crash.matrix_doc import DbFaultRow, MatrixRows
from tests.support.pgproxy import PgProxy, When

NAME, KEY = "doc.bin", "db-fault-key"
OLD, NEW = 1, 2  # payload seeds
SIZE = 128 * 1024
FULL = os.environ.get("BLOBLEDGER_DB_FAULTS") == "all"


@dataclass(frozen=True)
class Cut:
    """Where the connection is cut: the ``nth`` statement matching ``pattern`` of ``step``,
    armed at the failpoint ``arm_at`` (None: when the operation starts; ``after``: count
    only once a statement matching it ran)."""

    op: str  # create | replace | delete | stage
    step: str
    statement: str  # the statement as the table names it
    pattern: str
    when: When
    arm_at: str | None = None
    after: str | None = None
    nth: int = 1

    @property
    def commit(self) -> bool:
        return self.statement == "COMMIT"

    @property
    def answered(self) -> bool:
        """Whether, with one cut and the database back at once, the writer must answer
        success: a compare-and-set step is tried once more on a fresh connection (it loses
        if the first applied, and the writer recognises its own result); an insert (C1, R1,
        A1) is never run twice, so it succeeds only if its rows are found to have landed."""
        return self.step not in INSERTS or (self.commit and self.when == "after")

    @property
    def id(self) -> str:
        words = self.statement.split()[:3] + ([str(self.nth)] if self.nth > 1 else [])
        step = re.sub(r"\W+", "_", self.step).strip("_")
        return f"{self.op}-{step}-{'_'.join(words)}-{self.when}"

    @property
    def title(self) -> str:
        where = "before it is sent" if self.when == "before" else "after it ran, unanswered"
        nth = f" (the {_ordinal(self.nth)})" if self.nth > 1 else ""
        return f"`{self.statement}`{nth}, {where}"


INSERTS = {"C1", "R1", "A1"}


def _ordinal(n: int) -> str:
    return {2: "second", 3: "third"}.get(n, f"{n}th")


Statement = tuple[str, str] | tuple[str, str, int]  # label, pattern[, nth]


def step_cuts(op: str, step: str, statements: list[Statement], *,
              arm_at: str | None = None) -> list[Cut]:
    """Each of the step's statements cut before it is sent; its COMMIT before and after."""
    anchor = statements[0][1] if arm_at is None else None
    cuts = []
    for label, pattern, *nth in statements:
        cuts.append(Cut(op, step, label, pattern, "before", arm_at,
                        anchor if pattern != anchor else None, nth[0] if nth else 1))
    for when in ("before", "after"):
        cuts.append(Cut(op, step, "COMMIT", r"^\s*COMMIT", when, arm_at, anchor))
    return cuts


UPDATE_BLOBS = r"^UPDATE blobs\b"
CUTS = [
    *step_cuts("create", "C1", [
        ("DELETE FROM idempotency_keys", r"^DELETE FROM idempotency_keys\b"),
        ("INSERT INTO idempotency_keys", r"^INSERT INTO idempotency_keys\b"),
        ("INSERT INTO documents", r"^INSERT INTO documents\b"),
        ("INSERT INTO blobs", r"^INSERT INTO blobs\b")]),
    *step_cuts("create", "confirm", [("UPDATE blobs", UPDATE_BLOBS)],
               arm_at="create.after_upload"),
    *step_cuts("create", "C4", [
        ("UPDATE blobs", UPDATE_BLOBS),
        ("UPDATE documents", r"^UPDATE documents\b"),
        ("UPDATE idempotency_keys", r"^UPDATE idempotency_keys\b")],
        arm_at="create.after_tag"),
    *step_cuts("replace", "R1", [("INSERT INTO blobs", r"^INSERT INTO blobs\b")]),
    *step_cuts("replace", "confirm", [("UPDATE blobs", UPDATE_BLOBS)],
               arm_at="replace.after_upload"),
    *step_cuts("replace", "R4", [
        ("UPDATE blobs", UPDATE_BLOBS),
        ("UPDATE documents", r"^UPDATE documents\b"),
        ("UPDATE blobs", UPDATE_BLOBS, 2)],
        arm_at="replace.after_tag"),
    *step_cuts("delete", "(one transaction)", [
        ("DELETE FROM documents", r"^DELETE FROM documents\b"),
        ("UPDATE blobs", UPDATE_BLOBS)]),
    *step_cuts("stage", "A1", [("INSERT INTO blobs", r"^INSERT INTO blobs\b")]),
    *step_cuts("stage", "confirm_staged", [("UPDATE blobs", UPDATE_BLOBS)],
               arm_at="stage.after_upload"),
]
STORES = ["local", "azure", "s3"]
GROUPS = {1: "Database faults: one connection cut",
          2: "Database faults: the database stays away (every statement after the cut fails)"}


def in_suite(cut: Cut, store: str, times: int) -> bool:
    """The suite's share: every single cut on the local disk, the applied COMMITs on
    Azurite and, with the database staying away, the COMMITs of C1, C4, R4 and the delete
    on the local disk."""
    if FULL:
        return True
    if times == 1:
        return store == "local" or (store == "azure" and cut.commit and cut.when == "after")
    return store == "local" and cut.commit and (cut.step in ("C1", "C4", "R4")
                                                or cut.op == "delete")


MATRIX = [(c, s, t) for t in GROUPS for c in CUTS for s in STORES if in_suite(c, s, t)]


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    port = make_url(pg_url).port or 5432
    with PgProxy(port) as running:
        yield running


@dataclass
class Outcome:
    """One client's view: what the writer answered, what the retry answered."""

    first: Any = None  # a Document, a StagedBlob, True (deleted) or the exception
    retry: str = ""


@pytest.mark.parametrize(("cut", "store", "times"), MATRIX,
                         ids=[f"{c.id}-{s}{'-stays' if t > 1 else ''}" for c, s, t in MATRIX])
async def test_db_fault(cut: Cut, store: str, times: int, tmp_path: Path,
                        request: pytest.FixtureRequest, proxy: PgProxy,
                        matrix_rows: MatrixRows) -> None:
    direct = await make_target(f"postgresql-{store}", tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    async with target.ledger() as ledger:
        setup = await SETUPS[cut.op](ledger)
        outcome = Outcome()
        with armed(proxy, cut, times):
            outcome.first = await answer(RUNS[cut.op](ledger, setup))
        assert proxy.fired, f"the cut at {cut.statement} never fired: {proxy.statements}"
        assert not proxy.armed or times > 1
        if times > 1:
            assert isinstance(outcome.first, Exception), "answered with the database away"
        elif cut.answered:
            assert not isinstance(outcome.first, Exception), \
                f"the writer answered {outcome.first!r}, the database back at once"
        proxy.disarm()
        outcome.retry = await RETRIES[cut.op](ledger, setup, outcome.first, times > 1)
    resolve_at = target.ledger(clock_offset=RESOLVE_AT)
    async with resolve_at as ledger:
        steps = await settle(ledger)
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
        end = await ENDS[cut.op](ledger, setup)
        left = await describe(ledger)
    matrix_rows.add_db_fault(DbFaultRow(
        GROUPS[times], cut.op, cut.step, cut.title, f"postgresql-{store}", said(outcome.first),
        outcome.retry, "; ".join([*steps, end]) if steps else f"nothing to do; {end}", left))


@dataclass
class armed:
    """The proxy armed for ``cut`` (at its failpoint, through the failpoints' hook)."""

    proxy: PgProxy
    cut: Cut
    times: int

    def __enter__(self) -> None:
        if self.cut.arm_at is None:
            self._arm()
            return
        pending = [self.cut.arm_at]

        async def hook(point: str) -> None:
            if pending and point == pending[0]:
                pending.clear()
                self._arm()

        failpoints.set_hook(hook)

    def _arm(self) -> None:
        self.proxy.arm(self.cut.pattern, self.cut.when, nth=self.cut.nth, after=self.cut.after,
                       then_down=self.times > 1)

    def __exit__(self, *exc: object) -> None:
        failpoints.set_hook(None)


async def answer(run: Awaitable[Any]) -> Any:
    """What the writer's caller was told: the result, or the exception."""
    try:
        return await run
    except Exception as exc:  # the writer's error is the answer under test
        return exc


def said(first: Any) -> str:
    if isinstance(first, Exception):
        return f"`{type(first).__name__}`"
    if isinstance(first, Document):
        return f"acknowledged v{first.version}"
    if isinstance(first, StagedBlob):
        return "acknowledged (staged)"
    return "acknowledged"


# -- the operations -------------------------------------------------------------------------
async def setup_nothing(ledger: Ledger) -> None:
    return None


async def setup_document(ledger: Ledger) -> Document:
    return await ledger.create(NAME, chunks(payload(OLD, SIZE)))


def create(ledger: Ledger, _setup: Any) -> Awaitable[Document]:
    return ledger.create(NAME, chunks(payload(NEW, SIZE)), idempotency_key=KEY)


def replace(ledger: Ledger, doc: Document) -> Awaitable[Document]:
    return ledger.replace(doc.id, chunks(payload(NEW, SIZE)), expected_version=1)


async def delete(ledger: Ledger, doc: Document) -> bool:
    await ledger.delete(doc.id, expected_version=1)
    return True


def stage(ledger: Ledger, _setup: Any) -> Awaitable[StagedBlob]:
    return ledger.stage(chunks(payload(NEW, SIZE)), filename="a.bin")


async def retry_create(ledger: Ledger, _setup: Any, first: Any, stays: bool) -> str:
    """The client retries under its key: the first answer again, else a fresh success;
    "in progress" only if the writer could not resolve it (the database stayed away)."""
    want = sha256(payload(NEW, SIZE))
    try:
        doc = await create(ledger, None)
        waited = ""
    except IdempotencyInProgress:
        assert stays, "the retry was told the first attempt still runs, but it answered"
        ledger.clock_offset = LEASE_EXPIRED
        doc = await create(ledger, None)
        waited = "`IdempotencyInProgress`; past the lease: "
    assert doc.name == NAME and doc.sha256 == want and doc.version == 1
    assert await read_all(ledger, doc.id) == payload(NEW, SIZE)
    if isinstance(first, Document):
        assert (doc.id, doc.version, doc.sha256, doc.blob) == \
            (first.id, first.version, first.sha256, first.blob)
        return waited + "the first answer (same id, version, checksum)"
    return waited + "created v1"


async def retry_replace(ledger: Ledger, doc: Document, first: Any, stays: bool) -> str:
    """Acknowledged: the document is the one answered. An error: nothing applied, and the
    client's replace at the same version succeeds (with the database staying away, a
    replace that applied unanswered shows as the new version holding the client's bytes)."""
    want = sha256(payload(NEW, SIZE))
    current = await ledger.get(doc.id)
    if isinstance(first, Document):
        assert (current.version, current.sha256, current.blob) == (2, want, first.blob)
        assert await read_all(ledger, doc.id) == payload(NEW, SIZE)
        return "not needed: the document is the one answered"
    try:
        again = await replace(ledger, doc)
    except PreconditionFailed as exc:
        assert stays, f"the first replace answered {first!r} but applied"
        assert exc.current_version == 2 and current.sha256 == want
        return "`PreconditionFailed`: v2 holds the client's bytes (the first applied)"
    assert (current.version, current.blob) == (1, doc.blob), "an unanswered replace applied"
    assert (again.version, again.sha256) == (2, want)
    assert await read_all(ledger, doc.id) == payload(NEW, SIZE)
    return "replaced v2"


async def retry_delete(ledger: Ledger, doc: Document, first: Any, stays: bool) -> str:
    if first is True:
        with pytest.raises(NotFound):
            await ledger.get(doc.id)
        return "not needed: the document is gone"
    try:
        await delete(ledger, doc)
    except NotFound:
        assert stays, f"the first delete answered {first!r} but applied"
        return "`NotFound` (the first applied)"
    return "deleted"


async def retry_stage(ledger: Ledger, _setup: Any, first: Any, stays: bool) -> str:
    if isinstance(first, StagedBlob):
        row = await ledger.transitions.staged_blob(first.name)
        assert row is not None and row.state == BlobState.PENDING
        assert row.attempt == first.attempt and row.sha256 == first.sha256
        assert (await ledger.store.stat(first.name)).sha256 == first.sha256
        return "not needed: the staged blob is the one answered"
    again = await stage(ledger, None)
    assert again.sha256 == sha256(payload(NEW, SIZE))
    return "staged"


async def end_create(ledger: Ledger, _setup: Any) -> str:
    docs = [d async for d in ledger.list()]
    assert [(d.name, d.version, d.sha256) for d in docs] == \
        [(NAME, 1, sha256(payload(NEW, SIZE)))], docs
    assert await read_all(ledger, docs[0].id) == payload(NEW, SIZE)
    return "doc.bin v1 (new bytes)"


async def end_replace(ledger: Ledger, doc: Document) -> str:
    current = await ledger.get(doc.id)
    assert (current.version, current.sha256) == (2, sha256(payload(NEW, SIZE)))
    assert await read_all(ledger, doc.id) == payload(NEW, SIZE)
    return "doc.bin v2 (new bytes)"


async def end_delete(ledger: Ledger, doc: Document) -> str:
    assert [d async for d in ledger.list()] == []
    return "no document"


async def end_stage(ledger: Ledger, _setup: Any) -> str:
    return "nothing staged left (never attached)"


Setup = Callable[[Ledger], Awaitable[Any]]
SETUPS: dict[str, Setup] = {"create": setup_nothing, "replace": setup_document,
                            "delete": setup_document, "stage": setup_nothing}
RUNS: dict[str, Callable[[Ledger, Any], Awaitable[Any]]] = {
    "create": create, "replace": replace, "delete": delete, "stage": stage}
RETRIES: dict[str, Callable[[Ledger, Any, Any, bool], Awaitable[str]]] = {
    "create": retry_create, "replace": retry_replace, "delete": retry_delete,
    "stage": retry_stage}
ENDS: dict[str, Callable[[Ledger, Any], Awaitable[str]]] = {
    "create": end_create, "replace": end_replace, "delete": end_delete, "stage": end_stage}
