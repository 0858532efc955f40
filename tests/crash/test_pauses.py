"""The crash matrix with pauses: at every failpoint of the matrix (the documents' writers,
the direct and resumable uploads, the sweeper), on every backend combination it runs on, the
process stops (SIGSTOP) instead of dying. While it sleeps past its deadline
the sweeper, the deletion path and ``reconcile --fix`` run with the clock far past every
cutoff; then it wakes to that clock and finishes.

It must end with its bytes readable and acknowledged, or with a clear error (a
``BlobLedgerError``, never a storage error) and nothing changed. A paused sweeper must simply
finish. After one more resolution the settled invariants hold, the store holds exactly the
blobs of ready documents, and every acknowledged write reads back. The uploads' *retry*
cases have another process resume (tus) or complete (direct) the same upload while the first
one sleeps, and the woken one must not undo it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.crash.child import Job, Target, chunks, payload, sha256
from tests.crash.conftest import make_target
from tests.crash.harness import PAST_CUTOFFS, read_all
from tests.crash.matrix_doc import MatrixRows, PauseRow
from tests.crash.pause import (
    WAKE_AT,
    Outcome,
    paused,
    resolve_finally,
    resolve_meanwhile,
)
from tests.crash.test_matrix import (
    ABSENT,
    AFTER_SWEEP,
    CASES,
    CONTINUE,
    CREATED,
    KEY,
    NEW,
    REPLACED,
    UNCHANGED,
    Case,
    Doc,
    _outcome,
    in_suite,
    prepare,
)

#: every case of the matrix, on the backends it runs on there (tus: not on S3); in the
#: suite, on one backend, not the one its kill runs on
PAUSED = in_suite(CASES, turn=1)
#: a retry under the key while the first attempt sleeps: past its lease and the sweeper's
#: margin, before the resolvers run
RETRY_AT = PAST_CUTOFFS


@pytest.mark.parametrize(("case", "backend"), PAUSED,
                         ids=[f"{c.id}-{b}" for c, b in PAUSED])
async def test_pause_point(
    case: Case, backend: str, tmp_path: Path, request: pytest.FixtureRequest,
    matrix_rows: MatrixRows,
) -> None:
    target = replace(await make_target(backend, tmp_path, request), retag=case.retag)
    args, offset = await prepare(case, target)
    point = case.failpoints.replace("=kill", "=stop")
    job = Job(target, point, case.op, args, clock_offset=offset,
              report=str(tmp_path / "outcome.json"), wake_offset=WAKE_AT)
    retried: dict[str, object] | None = None
    async with paused(job) as child:
        meanwhile = []
        if case.retry and case.op == "create":
            retried = await _retry(target)
            meanwhile.append("a retry under the key returned the document")
        elif case.retry:  # another process continues the upload (its lease still runs)
            retried, did = await _continue_upload(case, target)
            meanwhile.append(did)
        if case.op == "sweep" and target.database_url.startswith("sqlite"):
            # One sweeper at a time on SQLite (the paused one holds the lock), and its other
            # claims may have stopped inside a write transaction, which locks out every
            # writer: nothing can run meanwhile. The woken sweeper must still finish.
            meanwhile.append("nothing can run (SQLite: the paused sweeper holds the sweep "
                             "lock and maybe the write lock)")
        else:
            meanwhile += await resolve_meanwhile(target)
        outcome = await child.resume()
    final, report = await resolve_finally(target)
    assert report.ok, f"woke to {outcome}\n{report.render()}"
    expect = _judge(case, outcome, retried)
    end = await _outcome(target, expect)
    await _acknowledged_reads_back(target, case, outcome)
    told = ("finished" if case.op in ("sweep", "retag") else
            "acknowledged" if outcome.ok else f"`{outcome.error}`")
    text = (f"meanwhile: {'; '.join(meanwhile) or 'nothing to do'}; woke: {told}"
            + (f"; then {'; '.join(final)}" if final else "") + f"; end: {end}")
    matrix_rows.add_pause(PauseRow(case.group, case.title, case.point, backend, text))


async def _retry(target: Target) -> dict[str, object]:
    """The client retries under the same key and bytes while the first attempt sleeps."""
    async with target.ledger(clock_offset=RETRY_AT) as ledger:
        doc = await ledger.create("doc.bin", chunks(payload(NEW)), idempotency_key=KEY)
        assert await read_all(ledger, doc.id) == payload(NEW)
    return {"id": doc.id, "version": doc.version, "sha256": doc.sha256}


async def _continue_upload(case: Case, target: Target) -> tuple[dict[str, object], str]:
    """While the first process sleeps, another one resumes (tus) or completes (direct) the
    same upload and reads the document back; its answer, and what it did."""
    did = await CONTINUE[case.op](target)
    async with target.ledger() as ledger:
        docs = [d async for d in ledger.list()]
    assert len(docs) == 1, docs
    doc = docs[0]
    return {"id": doc.id, "version": doc.version, "sha256": doc.sha256}, did


def _judge(case: Case, outcome: Outcome, retried: dict[str, object] | None) -> tuple[Doc, ...]:
    """What the woken process was told, checked; the ready documents that must follow."""
    if case.op == "sweep":
        assert outcome.ok, f"the woken sweeper failed: {outcome}"
        return AFTER_SWEEP
    if case.op == "retag":  # a paused retag worker must simply finish, changing nothing
        assert outcome.ok, f"the woken retag worker failed: {outcome}"
        return CREATED
    if not outcome.ok:
        # a direct upload's client, woken after another one completed the upload, has its
        # own put refused by the store: create-only, never overwritten
        refused = case.op == "direct" and outcome.error == "PutRefused"
        assert refused or outcome.clear_error(), (
            f"{case.op} woke to an unclear error: {outcome}")
    if retried is not None:  # the retry's answer is the key's answer
        if outcome.ok:
            assert outcome.answer == retried, f"first attempt {outcome}, retry {retried}"
        return CREATED
    if case.op in ("create", "tus", "direct"):
        if outcome.ok:
            assert (outcome.answer["version"], outcome.answer["sha256"]) == (
                1, sha256(payload(NEW))), outcome
        return CREATED if outcome.ok else ABSENT
    if case.op == "replace":
        if outcome.ok:
            assert (outcome.answer["version"], outcome.answer["sha256"]) == (
                2, sha256(payload(NEW))), outcome
        return REPLACED if outcome.ok else UNCHANGED
    assert case.op == "delete"
    return ABSENT if outcome.ok else UNCHANGED


async def _acknowledged_reads_back(target: Target, case: Case, outcome: Outcome) -> None:
    if case.op not in ("create", "replace", "tus", "direct") or not outcome.ok:
        return
    async with target.ledger() as ledger:
        doc = await ledger.get(str(outcome.answer["id"]))
        assert doc.version == outcome.answer["version"]
        assert await read_all(ledger, doc.id) == payload(NEW)
