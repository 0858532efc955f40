"""The crash matrix: every failpoint of create, replace, delete, the sweeper and the deletion
path, with a real SIGKILL, on {local disk, Azurite} x {SQLite, PostgreSQL}, with the retag
inline and deferred (``BLOBLEDGER_RETAG``; the deferred form adds the retag worker's points
and has no confirm or C3/R3 on the writer's path).

After the kill the state is described, resolved with the clock past every cutoff, checked
with the invariant checker (settled), and compared with the outcome the protocol promises:
a create either never happened or rolled forward; a replace is all old or all new; a delete
is complete. Afterwards the store holds exactly the blobs of ready documents.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from sqlalchemy import select

from blobledger.protocol.models import UploadRow, UploadState
from blobledger.uploads.resumable import Resumable
from tests.conftest import BACKENDS as ALL_BACKENDS
from tests.crash.child import CHUNK, Job, Target, chunks, direct_upload, payload
from tests.crash.conftest import DOC_ENV, make_target
from tests.crash.harness import (
    LEASE_EXPIRED,
    PAST_CUTOFFS,
    create_ready,
    describe,
    kill_at,
    read_all,
    resolve,
    settle,
)
from tests.crash.matrix_doc import MatrixRows, Row

OLD, NEW = 1, 2  # payload seeds
KEY = "crash-key-1"


Doc = tuple[str, int, int]  # name, version, payload seed
ABSENT: tuple[Doc, ...] = ()
CREATED: tuple[Doc, ...] = (("doc.bin", 1, NEW),)
UNCHANGED: tuple[Doc, ...] = (("doc.bin", 1, OLD),)
REPLACED: tuple[Doc, ...] = (("doc.bin", 2, NEW),)
# The sweeper's cases start from four crashed writers (see _crashed_writers):
# a (after C2: swept), b (after C3: rolled forward), c (after R3: unchanged), d (deleted).
AFTER_SWEEP: tuple[Doc, ...] = (("b", 1, NEW), ("c", 1, OLD))


@dataclass(frozen=True)
class Case:
    group: str
    title: str
    point: str  # the failpoint, possibly with @N (act on the N-th pass)
    op: str  # create | replace | delete | sweep
    expect: tuple[Doc, ...]  # the ready documents after resolution
    retry: bool = False  # resume the create under its idempotency key before the sweep
    retag: str = "inline"  # BLOBLEDGER_RETAG

    @property
    def id(self) -> str:
        return (f"{self.op}{'-retry' if self.retry else ''}-{self.point.replace('@', '-')}"
                + ("-deferred" if self.retag == "deferred" else ""))

    @property
    def base(self) -> str:
        """The case whatever the setting."""
        return self.id.removesuffix("-deferred")

    @property
    def failpoints(self) -> str:
        point, _, nth = self.point.partition("@")
        return f"{point}=kill" + (f"@{nth}" if nth else "")


UPLOAD_POINTS = [
    ("during the upload, after some bytes", "put.mid_stream@3"),
    ("during the upload, every byte staged, before publication", "put.before_commit"),
]
CREATE = [
    ("after C1 (rows inserted)", "create.after_insert", ABSENT),
    *[(title, point, ABSENT) for title, point in UPLOAD_POINTS],
    ("after C2 (uploaded, tagged pending)", "create.after_upload", ABSENT),
    ("after C2, the intent confirmed as its own (lease extended)", "create.after_confirm",
     ABSENT),
    ("after C3 (tagged committed)", "create.after_tag", CREATED),
    ("after C4 (committed)", "create.after_commit", CREATED),
]
REPLACE = [
    ("after R1 (row inserted)", "replace.after_insert", UNCHANGED),
    *[(title, point, UNCHANGED) for title, point in UPLOAD_POINTS],
    ("after R2 (uploaded, tagged pending)", "replace.after_upload", UNCHANGED),
    ("after R2, the intent confirmed as its own (lease extended)", "replace.after_confirm",
     UNCHANGED),
    ("after R3 (tagged committed)", "replace.after_tag", UNCHANGED),
    ("after R4 (committed)", "replace.after_commit", REPLACED),
]
TUS = [
    ("after C1 (upload and rows inserted)", "tus.after_create", ABSENT),
    ("mid-upload (second part staged, not yet recorded)", "tus.after_part@2", ABSENT),
    ("every part staged, the last not yet recorded", "tus.after_part@4", ABSENT),
    ("every part recorded, about to be published", "staged.before_commit", ABSENT),
    ("parts published create-only, tagged pending, hashed", "tus.after_publish", ABSENT),
    ("after confirm", "tus.after_confirm", ABSENT),
    ("after C3 (tagged committed)", "tus.after_tag", CREATED),
    ("after C4 (committed)", "tus.after_commit", CREATED),
]
DIRECT = [
    ("after C1 (the URL handed out)", "direct.after_create", ABSENT),
    ("after the client's create-only put", "direct.after_upload", ABSENT),
    ("completion: stored bytes hashed and recorded", "direct.after_verify", ABSENT),
    ("completion: after confirm", "direct.after_confirm", ABSENT),
    ("completion: after C3 (tagged committed)", "direct.after_tag", CREATED),
    ("completion: after C4 (committed)", "direct.after_commit", CREATED),
]
SWEEP = [
    ("stale intents claimed", "sweep.after_claim"),
    ("pending blobs deleted, rows not yet removed", "sweep.after_delete"),
    ("pending blobs deleted, rows removed, the late delete not yet sent",
     "sweep.after_remove@1"),
    ("refused deletes, before roll-forward / hand-over", "sweep.before_resolve"),
    ("deletion path: rows claimed", "deletion.after_claim"),
    ("deletion path: blobs tagged deleting", "deletion.after_tag"),
    ("deletion path: blobs deleted, rows not yet removed", "deletion.after_delete"),
]
RETAG = [
    ("retag worker: owed retags claimed", "retag.after_claim"),
    ("retag worker: blobs tagged committed, not yet recorded", "retag.after_tag"),
]
BASE_CASES = [
    *[Case("Create", t, p, "create", e) for t, p, e in CREATE],
    *[Case("Create, then a retry under the same idempotency key", t, p, "create", CREATED,
           retry=True) for t, p, _ in CREATE],
    *[Case("Replace", t, p, "replace", e) for t, p, e in REPLACE],
    Case("Delete", "after the commit", "delete.after_commit", "delete", ABSENT),
    *[Case("Resumable upload (tus), abandoned", t, p, "tus", e) for t, p, e in TUS],
    *[Case("Direct upload, abandoned", t, p, "direct", e) for t, p, e in DIRECT],
    *[Case("Direct upload, completed again by another process", t, p, "direct", CREATED,
           retry=True) for t, p, _ in DIRECT],
    *[Case("Resumable upload (tus), resumed by another process", t, p, "tus", CREATED,
           retry=True) for t, p, _ in TUS],
    *[Case("Sweeper and deletion path (four crashed writers: after C2, after C3, after R3, "
           "a delete)", t, p, "sweep", AFTER_SWEEP) for t, p in SWEEP],
    *[Case("Retag worker (a ready document whose retag is owed)", t, p, "retag", CREATED)
      for t, p in RETAG],
]
RETAGS = ("inline", "deferred")
#: the points the deferred form never reaches: confirm folds into C4/R4, and the retag is
#: the worker's, after C4/R4; so no pending row ever has a blob tagged committed, and the
#: sweeper never resolves a refused delete
INLINE_ONLY = ("after_confirm", "after_tag", "before_resolve")


def settings_of(case: Case) -> tuple[str, ...]:
    """The retag settings a case means something under."""
    if case.op == "retag":
        return ("deferred",)
    if case.point.partition("@")[0].rsplit(".", 1)[-1] in INLINE_ONLY:
        return ("inline",)
    return RETAGS


def _with_setting(case: Case, retag: str) -> Case:
    group = case.group if retag == "inline" or case.op == "retag" else (
        f"{case.group}, deferred retag")
    return replace(case, retag=retag, group=group)


#: every case under every setting it means something under
CASES = [_with_setting(c, s) for c in BASE_CASES for s in settings_of(c)]
BACKENDS = ALL_BACKENDS  # every database with every store, and PostgreSQL + S3


def runs_on(case: Case, backend: str) -> bool:
    """Every case on every backend but tus on S3: S3 takes multipart parts of 5 MiB or more
    (but the last), and the matrix's tus uploads are four parts of a few KiB (the S3 part
    mapping is tested with real sizes in tests/api/test_tus*.py)."""
    return not (case.op == "tus" and backend.endswith("-s3"))


#: every case on every backend it runs on: ``scripts/crash-matrix`` (which writes
#: docs/crash-matrix.md from the run) or ``BLOBLEDGER_CRASH_MATRIX=all``
FULL = bool(os.environ.get(DOC_ENV)) or os.environ.get("BLOBLEDGER_CRASH_MATRIX") == "all"


def one_setting(cases: list[Case], turn: int = 0) -> list[Case]:
    """Of a case that means something under both retag settings, one, taken in turn
    (``turn`` shifts it as it shifts the backends): the suite's time stays what it was with
    one setting, and every kind of operation meets both. ``FULL``: every case."""
    if FULL:
        return cases
    both = {c.base for c in cases if c.retag == "deferred"} & {
        c.base for c in cases if c.retag == "inline"}
    order = {base: k for k, base in enumerate(dict.fromkeys(
        c.base for c in cases if c.base in both))}
    return [c for c in cases if c.base not in both
            or RETAGS.index(c.retag) == (order[c.base] + turn) % len(RETAGS)]


#: the upload's points are each store's own (its staged blocks, its multipart upload, its
#: file): in the suite they take these in turn, any three in a row the three stores, so
#: that each store meets each of them
UPLOAD_TURNS = ["sqlite-local", "sqlite-azure", "postgresql-s3", "postgresql-local",
                "postgresql-azure", "postgresql-s3"]


def in_suite(cases: list[Case], turn: int = 0) -> list[tuple[Case, str]]:
    """The suite's short form of a matrix of real processes: every case on one backend it
    runs on, taken in turn within its group (the cases of one operation, a retry apart from
    the first attempt; each group starts where the last one left off), the upload's points
    from :data:`UPLOAD_TURNS`; ``turn`` shifts both rotations, so that the kill and the
    pause of one point land on different backends. Every backend thus meets every kind of
    operation of five cases or more, and each store each upload point. A case that means
    something under both retag settings runs under one of them, in turn
    (:func:`one_setting`). The whole matrix is ``FULL``."""
    if FULL:
        return [(case, backend) for case in cases for backend in BACKENDS
                if runs_on(case, backend)]
    uploads = {point for _, point in UPLOAD_POINTS}
    chosen = []
    start, group, index = turn, ("", False), 0
    seen: dict[str, int] = {}
    for case in one_setting(cases, turn):
        if (case.op, case.retry) != group:
            start, group, index = start + index, (case.op, case.retry), 0
        if case.point in uploads:
            seen[case.point] = seen.get(case.point, -1) + 1
            chosen.append((case, UPLOAD_TURNS[(seen[case.point] + turn) % len(UPLOAD_TURNS)]))
        else:
            backends = [b for b in BACKENDS if runs_on(case, b)]
            chosen.append((case, backends[(start + index) % len(backends)]))
        index += 1
    return chosen


MATRIX = in_suite(CASES)


async def prepare(case: Case, target: Target) -> tuple[dict[str, object], float]:
    """The state a case starts from, and the child's arguments and clock offset."""
    if case.op == "create":
        return {"name": "doc.bin", "seed": NEW, "key": KEY}, 0.0
    if case.op in ("tus", "direct"):
        return {"name": "doc.bin", "seed": NEW}, 0.0
    if case.op == "sweep":
        await _crashed_writers(target)
        return {}, PAST_CUTOFFS
    if case.op == "retag":  # a ready document (deferred: its retag owed)
        await create_ready(target, "doc.bin", NEW)
        return {}, 0.0
    doc = await create_ready(target, "doc.bin", OLD)
    return {"doc_id": doc.id, "version": 1, "seed": NEW}, 0.0


@pytest.mark.parametrize(("case", "backend"), MATRIX,
                         ids=[f"{c.id}-{b}" for c, b in MATRIX])
async def test_crash_point(
    case: Case, backend: str, tmp_path: Path, request: pytest.FixtureRequest,
    matrix_rows: MatrixRows,
) -> None:
    target = replace(await make_target(backend, tmp_path, request), retag=case.retag)
    args, offset = await prepare(case, target)
    await kill_at(Job(target, case.failpoints, case.op, args, clock_offset=offset))

    async with target.ledger() as ledger:
        left = await describe(ledger)
    steps = []
    if case.retry:
        resume = CONTINUE.get(case.op, _retry)
        steps.append(await resume(target))
    resolution = await resolve(target, settle)
    report = resolution.report
    assert report is not None and report.ok, f"{left}\n{report and report.render()}"
    outcome = await _outcome(target, case.expect)
    steps += resolution.steps
    matrix_rows.add(Row(case.group, case.title, case.point, backend, left,
                        "; ".join(steps) or "nothing to do", outcome))


async def _crashed_writers(target: Target) -> None:
    """Four writers SIGKILLed at the points the sweeper exists for (deferred: b after C4, its
    retag owed, and c after R2)."""
    deferred = target.retag == "deferred"
    await kill_at(Job(target, "create.after_upload=kill", "create", {"name": "a", "seed": NEW}))
    await kill_at(Job(target, f"create.after_{'commit' if deferred else 'tag'}=kill", "create",
                      {"name": "b", "seed": NEW}))
    c = await create_ready(target, "c", OLD)
    await kill_at(Job(target, f"replace.after_{'upload' if deferred else 'tag'}=kill",
                      "replace", {"doc_id": c.id, "version": 1, "seed": NEW}))
    d = await create_ready(target, "d", OLD)
    await kill_at(Job(target, "delete.after_commit=kill", "delete",
                      {"doc_id": d.id, "version": 1}))


async def _retry(target: Target) -> str:
    """The client retries with the same key and bytes once the dead attempt's lease ran out."""
    async with target.ledger(clock_offset=LEASE_EXPIRED) as ledger:
        doc = await ledger.create("doc.bin", chunks(payload(NEW)), idempotency_key=KEY)
        assert await read_all(ledger, doc.id) == payload(NEW)
        again = await ledger.create("doc.bin", chunks(payload(NEW)), idempotency_key=KEY)
        assert again.id == doc.id and again.blob == doc.blob
    return "retry under the key returned the document"


async def _resume_upload(target: Target) -> str:
    """Another process continues the upload from its durable offset and completes it."""
    async with target.ledger() as ledger:
        resumable = Resumable(ledger, segment=CHUNK)
        async with ledger.db.session() as session:
            ids = (await session.execute(select(UploadRow.id))).scalars().all()
        assert len(ids) == 1, ids
        upload = await resumable.find(ids[0])
        if upload.state == UploadState.DONE:
            return "the upload had completed"
        offset = upload.offset
        data = payload(NEW)
        if offset < upload.length:
            await resumable.append(upload, offset, chunks(data[offset:]))
            upload = await resumable.find(upload.id)
        doc = await resumable.complete(upload)
        assert await read_all(ledger, doc.id) == data
    return f"resumed at offset {offset} of {len(data)} and completed"


async def _complete_direct(target: Target) -> str:
    """Another process completes the direct upload (the client re-sends if nothing arrived)."""
    async with target.ledger() as ledger:
        async with ledger.db.session() as session:
            rows = (await session.execute(select(UploadRow.id, UploadRow.state))).all()
        assert len(rows) == 1, rows
        if rows[0].state == UploadState.DONE:
            return "the upload had completed"
        doc_id = await direct_upload(ledger, "doc.bin", payload(NEW), upload_id=rows[0].id)
        assert await read_all(ledger, doc_id) == payload(NEW)
    return "completed by another process"


#: another process continues an upload: resumes a tus one, completes a direct one
CONTINUE = {"tus": _resume_upload, "direct": _complete_direct}


async def _outcome(target: Target, expect: tuple[Doc, ...]) -> str:
    """Assert the promised end state; the store holds exactly the blobs of ready documents."""
    async with target.ledger() as ledger:
        docs = [d async for d in ledger.list()]
        blobs = {info.name async for info in ledger.store.list(ledger.settings.blob_prefix)}
        assert blobs == {d.blob for d in docs}, (docs, blobs)
        found = [(d.name, d.version, await read_all(ledger, d.id)) for d in docs]
        leftovers = [u async for u in ledger.store.list_uncommitted(ledger.settings.blob_prefix)]
    assert found == [(name, version, payload(seed)) for name, version, seed in expect]
    text = ", ".join(f"{name} v{version} ({'new' if seed == NEW else 'old'} bytes)"
                     for name, version, seed in expect) or "no document"
    if leftovers:
        text += (f"; uncommitted bytes remain under {len(leftovers)} name(s)"
                 + (" beside the committed blob" if all(u.committed for u in leftovers) else ""))
    return text
