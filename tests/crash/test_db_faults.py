"""Database faults: the connection to PostgreSQL cut at each statement of each writer step
(:mod:`tests.support.pgproxy`), including at COMMIT, before it is sent (it never applied)
and after (it applied; the writer never hears).

Each case runs a real create (under an idempotency key), replace, delete or stage, a tus or
direct upload (a document's or an attachment's), or a sweep, through a ledger whose
database URL goes through the proxy. Then the client retries (the proxy no longer cutting;
an upload's client resumes or completes its upload again; a sweeper runs again): it must
get the first answer if there was one (same id, version and checksum), or a fresh success;
never a second document, and never "in progress" once the writer has answered. Then the
sweeper, the deletion path and the reconciler run with the clock far ahead, the settled
invariants must hold, and the acknowledged bytes must be readable. In the group *the
database stays away*, every statement after the cut is cut too until the retry: the writer
must answer an error, and the client's retry must still end with one document.

SQLite has no connection to cut: these run on PostgreSQL only. The suite runs every cut of
the writers' own steps on the local disk and a share of the others (:func:`in_suite`);
``BLOBLEDGER_DB_FAULTS=all`` (which ``scripts/crash-matrix`` sets) runs every cut on local
disk, Azurite and S3 (moto) in both groups, and ``docs/crash-matrix.md``'s "Database
faults" table is made from that run.
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
from sqlalchemy.exc import DBAPIError

from blobledger import failpoints
from blobledger._base.names import check_content_type
from blobledger.errors import (
    BlobAlreadyExists,
    BlobNotFound,
    DatabaseUnavailable,
    IdempotencyInProgress,
    NameTaken,
    NotFound,
    OffsetMismatch,
    PreconditionFailed,
    UploadGone,
)
from blobledger.protocol.attachments import StagedBlob, StagedUpload
from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import PENDING_TAG, BlobState, UploadState
from blobledger.protocol.transitions import Intent, UploadRecord
from blobledger.uploads.direct import DirectUploads
from blobledger.uploads.resumable import Resumable
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import SWEEP_LEASE, Sweeper, SweepReport
from tests.crash.child import Target, chunks, payload, sha256
from tests.crash.conftest import make_target
from tests.crash.harness import (
    LEASE_EXPIRED,
    PAST_CUTOFFS,
    RESOLVE_AT,
    describe,
    read_all,
    settle,
    summary,
)
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

    op: str  # create | replace | delete | stage | tus | direct | tus-stage | sweep
    step: str
    statement: str  # the statement as the table names it
    pattern: str
    when: When
    arm_at: str | None = None
    after: str | None = None
    nth: int = 1
    stores: tuple[str, ...] = ("local", "azure", "s3")  # where the step runs at all
    meanwhile: str | None = None  # what happens at ``arm_at`` before the cut is armed
    retag: str = "inline"  # BLOBLEDGER_RETAG of the writer's ledger

    @property
    def commit(self) -> bool:
        return self.statement == "COMMIT"

    @property
    def answered(self) -> bool:
        """Whether, with one cut and the database back at once, the writer must answer
        success: a compare-and-set step is tried once more on a fresh connection (it loses
        if the first applied, and the writer recognises its own result); an insert (C1, R1,
        A1, an upload's) is never run twice, so it succeeds only if its rows are found to
        have landed. The steps of :data:`RESUMED` answer the error: the client resumes the
        upload (or the sweeper runs again) and gets a fresh success then."""
        if self.step in RESUMED:
            return False
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


INSERTS = {"C1", "R1", "A1", "begin_upload", "begin_staged_upload"}
#: steps that are not tried again on a lost connection: an upload's client resumes it from
#: the durable offset or completes it again; a sweeper that stopped is run again (its claimed
#: rows wait for its lease, its fenced ones are the deletion path's)
RESUMED = {"record_parts", "record_verified", "confirm_received", "finish_upload",
           "fence_swept", "abandon"}


def _ordinal(n: int) -> str:
    return {2: "second", 3: "third"}.get(n, f"{n}th")


Statement = tuple[str, str] | tuple[str, str, int]  # label, pattern[, nth]


def step_cuts(op: str, step: str, statements: list[Statement], *,
              arm_at: str | None = None, **where: Any) -> list[Cut]:
    """Each of the step's statements cut before it is sent; its COMMIT before and after
    (``where``: the cuts' ``stores`` and ``meanwhile``)."""
    anchor = statements[0][1] if arm_at is None else None
    cuts = []
    for label, pattern, *nth in statements:
        cuts.append(Cut(op, step, label, pattern, "before", arm_at,
                        anchor if pattern != anchor else None, nth[0] if nth else 1, **where))
    for when in ("before", "after"):
        cuts.append(Cut(op, step, "COMMIT", r"^\s*COMMIT", when, arm_at, anchor, **where))
    return cuts


def statement_cuts(op: str, step: str, label: str, pattern: str, **where: Any) -> list[Cut]:
    """A step that is one autocommit statement (no BEGIN, no COMMIT: it commits as it runs):
    the statement cut before it is sent and after it ran, unanswered."""
    return [Cut(op, step, label, pattern, when, **where) for when in ("before", "after")]


UPDATE_BLOBS = r"^UPDATE blobs\b"
UPLOAD_INSERTS: list[Statement] = [
    ("INSERT INTO documents", r"^INSERT INTO documents\b"),
    ("INSERT INTO blobs", r"^INSERT INTO blobs\b"),
    ("INSERT INTO uploads", r"^INSERT INTO uploads\b")]
SET_HANDLE: list[Statement] = [("UPDATE uploads", r'^UPDATE uploads SET handle\b')]
RECORD_VERIFIED: list[Statement] = [("UPDATE uploads", r"^UPDATE uploads SET sha256\b")]
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
    # C4 on a row a sweeper claimed after C3 and has not decided yet: the writer's own
    # compare-and-set loses, the roll-forward on the claimed row wins
    *step_cuts("create", "C4 on a claimed row", [
        ("UPDATE blobs", UPDATE_BLOBS),
        ("UPDATE blobs", UPDATE_BLOBS, 2),
        ("UPDATE documents", r"^UPDATE documents\b"),
        ("UPDATE idempotency_keys", r"^UPDATE idempotency_keys\b")],
        arm_at="create.after_tag", meanwhile="sweeper_claims"),
    # uploads that outlive a request: tus (one part) and direct, a document's or a staged
    # attachment's; the store's handle is recorded only where the store has one (tus: S3's
    # multipart upload id; direct: the local disk's token, whose bytes `receive` takes)
    *step_cuts("tus", "begin_upload", UPLOAD_INSERTS),
    *step_cuts("tus", "set_handle", SET_HANDLE, stores=("s3",)),
    *step_cuts("tus", "record_parts", [("UPDATE uploads", r'^UPDATE uploads SET "?offset\b')]),
    *step_cuts("tus", "record_verified", RECORD_VERIFIED),
    *step_cuts("tus", "C4 (the upload done)", [
        ("UPDATE uploads", r"^UPDATE uploads SET state\b")], arm_at="tus.after_tag"),
    *step_cuts("direct", "begin_upload", UPLOAD_INSERTS),
    *step_cuts("direct", "set_handle", SET_HANDLE, stores=("local",)),
    *step_cuts("direct", "confirm_received", [
        ("UPDATE uploads", r"^UPDATE uploads SET changed_at\b")], stores=("local",)),
    *step_cuts("direct", "record_verified", RECORD_VERIFIED),
    # a tus upload's termination (DELETE): told success only once its intent went to the
    # deletion path; a lost transaction leaves the upload open and says so
    *step_cuts("tus-terminate", "abandon", [
        ("UPDATE blobs", UPDATE_BLOBS),
        ("DELETE FROM documents", r"^DELETE FROM documents\b"),
        ("DELETE FROM uploads", r"^DELETE FROM uploads\b")]),
    *step_cuts("tus-stage", "begin_staged_upload", UPLOAD_INSERTS[1:]),
    *step_cuts("tus-stage", "finish_upload", [
        ("UPDATE uploads", r"^UPDATE uploads SET state\b")], arm_at="tus.stage.after_tag"),
    # S3: the sweeper fences a dead writer's intent pending -> deleting under its claim
    # before any delete (its pending document, key and upload row go with it)
    # an unkeyed creation under the deferred retag: C1 and C4 are one statement each
    # (``protocol/single.py``), in autocommit
    *statement_cuts("create-one", "C1, one statement",
                    "WITH c1_document AS (INSERT INTO documents) INSERT INTO blobs",
                    r"^WITH c1_document\b", retag="deferred"),
    *statement_cuts("create-one", "C4, one statement",
                    "WITH c4_blob AS (UPDATE blobs), c4_document, c4_event SELECT",
                    r"^WITH c4_blob\b", arm_at="create.after_upload", retag="deferred"),
    *step_cuts("sweep", "fence_swept", [
        ("UPDATE blobs", UPDATE_BLOBS),
        ("DELETE FROM documents", r"^DELETE FROM documents\b"),
        ("DELETE FROM idempotency_keys", r"^DELETE FROM idempotency_keys\b")],
        arm_at="sweep.after_claim", stores=("s3",)),
]
STORES = ["local", "azure", "s3"]
GROUPS = {1: "Database faults: one connection cut",
          2: "Database faults: the database stays away (every statement after the cut fails)"}


#: the steps of the first column (a writer's own operation): their share is the widest
FIRST = {"C1", "confirm", "C4", "R1", "R4", "(one transaction)", "A1", "confirm_staged",
         "C1, one statement", "C4, one statement"}
#: of the other steps, the suite runs these cases (ids as the parameters name them): the
#: applied COMMIT of each step on its first store (not the direct upload's begin and
#: verify, the same transactions as tus's, nor tus's handle, S3's), every cut that the
#: connection-loss handling of an upload's insert and handle answers, the claimed C4's
#: second compare-and-set and its COMMIT, and two cases where the database stays away
SUITE = {
    "create-C4_on_a_claimed_row-UPDATE_blobs_2-before-local",
    "create-C4_on_a_claimed_row-COMMIT-before-local",
    "create-C4_on_a_claimed_row-COMMIT-after-local",
    "tus-begin_upload-COMMIT-after-local",
    "tus-record_parts-COMMIT-after-local",
    "tus-record_verified-COMMIT-after-local",
    "tus-C4_the_upload_done-COMMIT-after-local",
    "direct-set_handle-UPDATE_uploads-before-local",
    "direct-set_handle-COMMIT-after-local",
    "tus-stage-begin_staged_upload-COMMIT-after-local",
    "tus-stage-finish_upload-COMMIT-after-local",
    "sweep-fence_swept-COMMIT-after-s3",
    "tus-terminate-abandon-COMMIT-before-local",
    "tus-terminate-abandon-COMMIT-after-local",
    "tus-terminate-abandon-COMMIT-before-local-stays",
    "create-C4_on_a_claimed_row-COMMIT-before-local-stays",
    "tus-begin_upload-COMMIT-after-local-stays",
    "create-one-C1_one_statement-WITH_c1_document_AS-after-local-stays",
    "create-one-C4_one_statement-WITH_c4_blob_AS-after-local-stays",
}


def case_id(cut: Cut, store: str, times: int) -> str:
    return f"{cut.id}-{store}{'-stays' if times > 1 else ''}"


def in_suite(cut: Cut, store: str, times: int) -> bool:
    """The suite's share: every single cut of the first column's steps on the local disk,
    their applied COMMITs on Azurite and, with the database staying away, the COMMITs of
    C1, C4, R4 and the delete on the local disk; of the other steps, :data:`SUITE`."""
    if FULL:
        return True
    if cut.step not in FIRST:
        return case_id(cut, store, times) in SUITE
    if case_id(cut, store, times) in SUITE:
        return True
    if times == 1:
        return store == "local" or (store == "azure" and cut.commit and cut.when == "after")
    return store == "local" and cut.commit and (cut.step in ("C1", "C4", "R4")
                                                or cut.op == "delete")


EVERY = [(c, s, t) for t in GROUPS for c in CUTS for s in STORES if s in c.stores]
MATRIX = [(c, s, t) for c, s, t in EVERY if in_suite(c, s, t)]
assert not SUITE - {case_id(*case) for case in EVERY}, "a suite case names no cut"


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
                         ids=[case_id(*case) for case in MATRIX])
async def test_db_fault(cut: Cut, store: str, times: int, tmp_path: Path,
                        request: pytest.FixtureRequest, proxy: PgProxy,
                        matrix_rows: MatrixRows) -> None:
    direct = await make_target(f"postgresql-{store}", tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url),
                                 retag=cut.retag)
    async with target.ledger() as ledger:
        setup = await SETUPS[cut.op](ledger)
        outcome = Outcome()
        meanwhile = MEANWHILE[cut.meanwhile](direct) if cut.meanwhile else None
        with armed(proxy, cut, times, meanwhile):
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
    meanwhile: Callable[[], Awaitable[None]] | None = None

    def __enter__(self) -> None:
        if self.cut.arm_at is None:
            self._arm()
            return
        pending = [self.cut.arm_at]

        async def hook(point: str) -> None:
            if pending and point == pending[0]:
                pending.clear()
                if self.meanwhile is not None:
                    await self.meanwhile()
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
    if isinstance(first, SweepReport):
        return "sweeper: " + ", ".join(did(first))
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
    "in progress" only if the writer could not resolve it (the database stayed away): past
    the lease the retry takes the intent over, or, if a sweeper claimed it (no writer takes
    a claimed intent over), the sweeper resolves it first."""
    try:
        doc = await create(ledger, None)
        waited = ""
    except IdempotencyInProgress:
        assert stays, "the retry was told the first attempt still runs, but it answered"
        ledger.clock_offset = LEASE_EXPIRED
        try:
            doc = await create(ledger, None)
            waited = "`IdempotencyInProgress`; past the lease: "
        except IdempotencyInProgress:
            ledger.clock_offset = RESOLVE_AT  # past the claim's lease
            swept = ", ".join(did(await Sweeper(ledger).run_once()))
            doc = await create(ledger, None)
            waited = f"`IdempotencyInProgress` (claimed); after the sweep ({swept}): "
    return waited + await _same_or_new(ledger, doc, first)


def create_unkeyed(ledger: Ledger, _setup: Any) -> Awaitable[Document]:
    return ledger.create(NAME, chunks(payload(NEW, SIZE)))


async def retry_create_unkeyed(ledger: Ledger, _setup: Any, first: Any, stays: bool) -> str:
    """Without a key, the client's retry can only find the name taken by what its first
    attempt left: a ready document holding its bytes (the first applied), or an intent the
    sweeper resolves past its lease (rolled forward, or removed and the name free again)."""
    if isinstance(first, Document):
        return await _same_or_new(ledger, await ledger.get(first.id), first)
    assert stays, f"the writer answered {first!r}, the database back at once"
    try:
        return "(retried) " + await _same_or_new(ledger, await create_unkeyed(ledger, None),
                                                  first)
    except NameTaken:
        pass
    if (found := await _ready(ledger)) is not None:
        await _same_or_new(ledger, found, first)  # the client's bytes, at v1
        return "`NameTaken`: v1 holds the client's bytes (the first applied)"
    ledger.clock_offset = RESOLVE_AT
    swept = ", ".join(did(await Sweeper(ledger).run_once()))
    if (found := await _ready(ledger)) is not None:
        await _same_or_new(ledger, found, first)
        return f"`NameTaken`; after the sweep ({swept}): the intent rolled forward to v1"
    doc = await create_unkeyed(ledger, None)
    return f"`NameTaken`; after the sweep ({swept}): " + await _same_or_new(ledger, doc, first)


async def _ready(ledger: Ledger) -> Document | None:
    found = [d async for d in ledger.list() if d.name == NAME]
    return found[0] if found else None


async def _same_or_new(ledger: Ledger, doc: Document, first: Any) -> str:
    """The client's document: the first answer's if there was one, else a new v1; its
    bytes the client's either way."""
    assert doc.name == NAME and doc.sha256 == sha256(payload(NEW, SIZE)) and doc.version == 1
    assert await read_all(ledger, doc.id) == payload(NEW, SIZE)
    if isinstance(first, Document):
        assert (doc.id, doc.version, doc.sha256, doc.blob) == \
            (first.id, first.version, first.sha256, first.blob)
        return "the first answer (same id, version, checksum)"
    return "created v1"


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


# -- uploads that outlive a request ---------------------------------------------------------
@dataclass
class Upload:
    """An upload's client: what it was told so far (the upload's id; a direct upload's
    token for ``serve``) and whether it stages an attachment."""

    kind: str  # tus | direct
    attachment: bool = False
    id: str | None = None
    token: str | None = None

    @property
    def meta(self) -> dict[str, str]:
        return {"attachment": "true", "filename": "a.bin"} if self.attachment else \
            {"name": NAME}


async def setup_tus(ledger: Ledger) -> Upload:
    return Upload("tus")


async def setup_direct(ledger: Ledger) -> Upload:
    return Upload("direct")


async def setup_staged_upload(ledger: Ledger) -> Upload:
    return Upload("tus", attachment=True)


async def tus(ledger: Ledger, client: Upload) -> Document | StagedUpload:
    """POST (the upload made), then one PATCH of every byte, completed with its last (one
    part: S3 takes a last part under its 5 MiB minimum)."""
    resumable = Resumable(ledger, segment=SIZE)
    upload = await resumable.create(SIZE, client.meta)
    client.id = upload.id
    return await _tus_rest(resumable, upload)


async def _tus_rest(resumable: Resumable, upload: UploadRecord) -> Document | StagedUpload:
    """A PATCH of the bytes from the durable offset, completed as the route does."""
    await resumable.append(upload, upload.offset, chunks(payload(NEW, SIZE)[upload.offset:]))
    fresh = await resumable.find(upload.id)
    if fresh.state == UploadState.OPEN:
        return await resumable.complete(fresh)
    made = await resumable.document(fresh)
    assert made is not None
    return made


async def direct(ledger: Ledger, client: Upload) -> Document | StagedUpload:
    """Begin, the client's put (to ``serve`` with its token, else the store's own create-only
    put, as the store's URL would), complete."""
    uploads = DirectUploads(ledger)
    began = await uploads.begin(NAME, SIZE, sha256=sha256(payload(NEW, SIZE)))
    client.id, client.token = began.upload.id, began.token
    await _direct_put(uploads, began.upload, client.token)
    return await uploads.complete(client.id)


async def _direct_put(uploads: DirectUploads, upload: UploadRecord, token: str | None) -> None:
    if token is not None:
        await uploads.receive(upload.id, token, chunks(payload(NEW, SIZE)))
    else:
        await uploads.ledger.store.put(upload.blob_name, chunks(payload(NEW, SIZE)),
                                       tags=PENDING_TAG)


async def retry_upload(ledger: Ledger, client: Upload, first: Any, stays: bool) -> str:
    """The client that was told its upload's id resumes it: HEAD (tus: a complete upload is
    completed there) and the rest of the bytes from the durable offset, or (direct) its put
    again (refused if the bytes arrived) and the completion again. A client never told of
    its upload makes a new one; if the lost one holds the name (the database stayed away, so
    its rows could not be found), only after the sweeper removed it."""
    if client.id is None:
        try:
            made, how = await START[client.kind](ledger, client), "uploaded anew"
        except NameTaken:
            assert stays, "the name is held by an upload its client was never told of"
            ledger.clock_offset = PAST_CUTOFFS
            swept = ", ".join(did(await Sweeper(ledger).run_once()))
            made = await START[client.kind](ledger, client)
            how = f"`NameTaken`; after the sweep ({swept}): uploaded anew"
    elif client.kind == "tus":
        resumable = Resumable(ledger, segment=SIZE)
        upload = await resumable.find(client.id)
        if upload.state == UploadState.DONE:
            found, how = await resumable.document(upload), "HEAD: done"
            assert found is not None
            made = found
        elif upload.offset == upload.length:
            made, how = await resumable.complete(upload), "HEAD completed it"
        else:
            made = await _tus_rest(resumable, upload)
            how = f"resumed at offset {upload.offset} and completed"
    else:
        uploads = DirectUploads(ledger)
        upload = await uploads.find(client.id)
        how = "completed again"
        if upload.state == UploadState.OPEN:
            try:
                await _direct_put(uploads, upload, client.token)
                how = "put again, completed"
            except (OffsetMismatch, BlobAlreadyExists):
                how = "put refused (the bytes arrived), completed again"
        made = await uploads.complete(client.id)
    if isinstance(made, StagedUpload):
        return f"{how}: {await _same_staged(ledger, made, first)}"
    return f"{how}: {await _same_or_new(ledger, made, first)}"


async def _same_staged(ledger: Ledger, made: StagedUpload, first: Any) -> str:
    assert made.sha256 == sha256(payload(NEW, SIZE))
    assert (await ledger.store.stat(made.name)).sha256 == made.sha256
    row = await ledger.transitions.staged_blob(made.name)
    assert row is not None and row.state == BlobState.PENDING and row.attempt == made.attempt
    if isinstance(first, StagedUpload):
        assert (made.name, made.upload_id) == (first.name, first.upload_id)
        return "the first answer (same blob)"
    return "staged"


# -- a tus upload's termination -------------------------------------------------------------
async def setup_open_upload(ledger: Ledger) -> Upload:
    """A tus upload with its first half stored, open."""
    client = Upload("tus")
    resumable = Resumable(ledger, segment=SIZE // 2)
    upload = await resumable.create(SIZE, client.meta)
    client.id = upload.id
    await resumable.append(upload, 0, chunks(payload(NEW, SIZE)[:SIZE // 2]))
    return client


async def terminate(ledger: Ledger, client: Upload) -> bool:
    """DELETE: the upload terminated (an error: not terminated)."""
    resumable = Resumable(ledger, segment=SIZE // 2)
    assert client.id is not None
    await resumable.terminate(await resumable.find(client.id))
    return True


async def retry_terminate(ledger: Ledger, client: Upload, first: Any, stays: bool) -> str:
    """An answered termination left no upload; one answered an error left it open (never
    half-terminated), and the client's DELETE again terminates it."""
    resumable = Resumable(ledger, segment=SIZE // 2)
    assert client.id is not None
    how = "nothing to retry"
    if isinstance(first, Exception):
        # the database away: its own error (the service answers 503 for either)
        assert isinstance(first, DatabaseUnavailable | DBAPIError), \
            f"the termination answered {first!r}"
        upload = await resumable.find(client.id)
        assert upload.state == UploadState.OPEN, "told not terminated, yet it is"
        await resumable.terminate(upload)
        how = "the upload still open; DELETE again: terminated"
    with pytest.raises(UploadGone):
        await resumable.find(client.id)
    return how


async def end_terminated(ledger: Ledger, _client: Upload) -> str:
    assert [d async for d in ledger.list()] == []
    return "no document, no upload"


# -- the sweeper ----------------------------------------------------------------------------
async def setup_dead_writer(ledger: Ledger) -> Intent:
    """A create under the key whose writer died after C2: its document, row and key
    pending, its blob tagged pending."""
    intent = await ledger.begin_create(NAME, check_content_type(None), KEY)
    await ledger.upload(intent, chunks(payload(NEW, SIZE)))
    return intent


async def sweep(ledger: Ledger, _intent: Intent) -> SweepReport:
    ledger.clock_offset = PAST_CUTOFFS
    return await Sweeper(ledger).run_once()


async def retry_sweep(ledger: Ledger, intent: Intent, first: Any, stays: bool) -> str:
    """The sweeper runs again past the first one's claim (a sweeper is not retried within a
    run); then the client retries under its key: the dead attempt's intent is gone with its
    key, so the retry creates the document anew."""
    ledger.clock_offset = PAST_CUTOFFS + SWEEP_LEASE + 1
    swept = ", ".join(did(await Sweeper(ledger).run_once())) or "nothing to do"
    doc = await create(ledger, None)
    assert doc.blob != intent.blob_name
    with pytest.raises(BlobNotFound):
        await ledger.store.stat(intent.blob_name)
    retried = await _same_or_new(ledger, doc, first)
    return f"the sweeper again: {swept}; the client's retry: {retried}"


def did(report: SweepReport) -> list[str]:
    return [d for d in summary(report) if not d.startswith(("claimed", "batches"))]


async def sweeper_claims(target: Target) -> None:
    """A sweeper claims the writer's intent (its lease long expired on the sweeper's clock)
    and pauses before deciding."""
    async with target.ledger(clock_offset=PAST_CUTOFFS) as other:
        _, rows = await other.transitions.claim(
            BlobState.PENDING, other.settings.sweep_after, 10, SWEEP_LEASE)
    assert len(rows) == 1, rows


MEANWHILE: dict[str, Callable[[Target], Callable[[], Awaitable[None]]]] = {
    "sweeper_claims": lambda target: lambda: sweeper_claims(target)}
START: dict[str, Callable[[Ledger, Upload], Awaitable[Document | StagedUpload]]] = {
    "tus": tus, "direct": direct}

Setup = Callable[[Ledger], Awaitable[Any]]
SETUPS: dict[str, Setup] = {"create": setup_nothing, "create-one": setup_nothing,
                            "replace": setup_document,
                            "delete": setup_document, "stage": setup_nothing,
                            "tus": setup_tus, "direct": setup_direct,
                            "tus-stage": setup_staged_upload, "sweep": setup_dead_writer,
                            "tus-terminate": setup_open_upload}
RUNS: dict[str, Callable[[Ledger, Any], Awaitable[Any]]] = {
    "create": create, "create-one": create_unkeyed, "replace": replace, "delete": delete,
    "stage": stage, "tus": tus,
    "direct": direct, "tus-stage": tus, "sweep": sweep, "tus-terminate": terminate}
RETRIES: dict[str, Callable[[Ledger, Any, Any, bool], Awaitable[str]]] = {
    "create": retry_create, "create-one": retry_create_unkeyed, "replace": retry_replace,
    "delete": retry_delete,
    "stage": retry_stage, "tus": retry_upload, "direct": retry_upload,
    "tus-stage": retry_upload, "sweep": retry_sweep, "tus-terminate": retry_terminate}
ENDS: dict[str, Callable[[Ledger, Any], Awaitable[str]]] = {
    "create": end_create, "create-one": end_create, "replace": end_replace,
    "delete": end_delete, "stage": end_stage,
    "tus": end_create, "direct": end_create, "tus-stage": end_stage, "sweep": end_create,
    "tus-terminate": end_terminated}
