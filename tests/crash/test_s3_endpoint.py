"""The crash and pause matrices of the S3 endpoint's writers: boto3's PutObject (a create of
a new key, a replace of an existing one) and DeleteObject sent to a real ``blobledger serve``
(:mod:`tests.crash.s3serve`) that dies (SIGKILL) or stops itself (SIGSTOP) at each failpoint
the request passes through.

Killed: the client must not be told success; then, with the clock past every cutoff, the
sweeper, the deletion path and ``reconcile --fix`` run, the settled invariants hold, and the
end state is the one the protocol promises (a create never happened or rolled forward, a
replace is all old or all new, a delete is complete), the store holding exactly the blobs of
ready documents. Paused: while the server sleeps, the same resolvers run with the clock far
ahead; woken to that clock, it must answer success (and the bytes read back through the
endpoint) or a clean S3 error (never ``InternalError``, never a lost connection) with
nothing changed; never a ready document without its bytes.

The multipart upload's steps have their own cases, in ``test_s3_multipart.py``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BACKENDS
from tests.crash.child import Target, payload
from tests.crash.conftest import DOC_ENV, make_target
from tests.crash.harness import create_ready, describe, resolve, settle
from tests.crash.matrix_doc import S3_GROUP, MatrixRows, PauseRow, Row
from tests.crash.pause import WAKE_AT, resolve_finally, resolve_meanwhile
from tests.crash.s3serve import BUCKET, Answer, serving
from tests.crash.test_matrix import (
    ABSENT,
    CREATE,
    CREATED,
    NEW,
    OLD,
    REPLACE,
    REPLACED,
    UNCHANGED,
    Doc,
    _outcome,
)

NAME = "doc.bin"


@dataclass(frozen=True)
class S3Case:
    group: str
    title: str
    point: str  # the failpoint, possibly with @N
    op: str  # put-create | put-replace | delete (multipart: to come)
    expect: tuple[Doc, ...]  # the ready documents after a kill and the resolution

    @property
    def id(self) -> str:
        return f"s3-{self.op}-{self.point.replace('@', '-')}"

    def armed(self, action: str) -> str:
        """The failpoint's setting: on its first pass only, unless the point names another
        (a request the client sends again must not stop the server a second time)."""
        point, _, nth = self.point.partition("@")
        return f"{point}={action}@{nth or 1}"


GROUP = S3_GROUP
BASE_CASES = [
    *[S3Case(GROUP + "PutObject of a new key, a create", t, p, "put-create", e)
      for t, p, e in CREATE],
    *[S3Case(GROUP + "PutObject of an existing key, a replace", t, p, "put-replace", e)
      for t, p, e in REPLACE],
    S3Case(GROUP + "DeleteObject", "after the commit", "delete.after_commit", "delete",
           ABSENT),
]

#: the request each operation's client sends
SENDS: dict[str, Callable[[Any], Any]] = {
    "put-create": lambda s3: s3.put_object(Bucket=BUCKET, Key=NAME, Body=payload(NEW)),
    "put-replace": lambda s3: s3.put_object(Bucket=BUCKET, Key=NAME, Body=payload(NEW)),
    "delete": lambda s3: s3.delete_object(Bucket=BUCKET, Key=NAME),
}
#: what a woken server's success means, and what its clean error leaves
ACKNOWLEDGED = {"put-create": CREATED, "put-replace": REPLACED, "delete": ABSENT}
REFUSED = {"put-create": ABSENT, "put-replace": UNCHANGED, "delete": UNCHANGED}

FULL = bool(os.environ.get(DOC_ENV)) or os.environ.get("BLOBLEDGER_CRASH_MATRIX") == "all"


def in_suite(turn: int, every: int = 1) -> list[tuple[S3Case, str]]:
    """Every case on every backend (``FULL``), else every ``every``-th case (from ``turn``)
    on one backend, in turn (``turn`` shifts the rotation: a point's kill and its pause
    land on different ones)."""
    if FULL:
        return [(case, backend) for case in BASE_CASES for backend in BACKENDS]
    return [(case, BACKENDS[(i + turn) % len(BACKENDS)]) for i, case in enumerate(BASE_CASES)
            if (i + turn) % every == 0]


#: the suite: every kill, one backend each; half the pauses (the whole matrix: ``FULL``)
KILLED = in_suite(0)
PAUSED = in_suite(2, every=2)


async def prepare(case: S3Case, target: Target) -> None:
    """A replace and a delete start from a ready document under the key."""
    if case.op != "put-create":
        await create_ready(target, NAME, OLD)


@pytest.mark.parametrize(("case", "backend"), KILLED, ids=[f"{c.id}-{b}" for c, b in KILLED])
async def test_s3_writer_killed(case: S3Case, backend: str, tmp_path: Path,
                                request: pytest.FixtureRequest,
                                matrix_rows: MatrixRows) -> None:
    target = await make_target(backend, tmp_path, request)
    await prepare(case, target)
    async with serving(target, tmp_path / "serve.log", case.armed("kill")) as served:
        served.send(SENDS[case.op])
        code = await served.died()
        told = await served.answered()
    await killed_row(target, backend, code, told, case, case.expect, matrix_rows)


async def killed_row(target: Target, backend: str, code: int | None, told: Answer, case: Any,
                     expect: tuple[tuple[str, int, int], ...],
                     matrix_rows: MatrixRows) -> None:
    """After ``serve`` was killed at ``case.point``: the client was told no success, the
    workers resolve what the kill left, the invariants hold, and the matrix's row records
    it (``expect``: the outcome the case names)."""
    assert code == -signal.SIGKILL, f"serve exited {code}, not killed at {case.point}"
    assert not told.ok, f"the client was told {told} by a server killed at {case.point}"
    async with target.ledger() as ledger:
        left = await describe(ledger)
    resolution = await resolve(target, settle)
    report = resolution.report
    assert report is not None and report.ok, f"{left}\n{report and report.render()}"
    outcome = await _outcome(target, expect)
    matrix_rows.add(Row(case.group, case.title, case.point, backend,
                        f"the client: {told}; {left}",
                        "; ".join(resolution.steps) or "nothing to do", outcome))


@pytest.mark.parametrize(("case", "backend"), PAUSED, ids=[f"{c.id}-{b}" for c, b in PAUSED])
async def test_s3_writer_paused(case: S3Case, backend: str, tmp_path: Path,
                                request: pytest.FixtureRequest,
                                matrix_rows: MatrixRows) -> None:
    target = await make_target(backend, tmp_path, request)
    await prepare(case, target)
    async with serving(target, tmp_path / "serve.log", case.armed("stop"),
                       wake_offset=WAKE_AT) as served:
        served.send(SENDS[case.op])
        await served.until("T")
        meanwhile = await resolve_meanwhile(target)
        served.wake()
        told = await served.answered()
        expect = judge(case, told)
        if told.ok and case.op != "delete":  # the acknowledged bytes, through the endpoint
            back = await served.read(NAME)
            assert back == (told.etag, payload(NEW)), f"{case.point}: read back {back[0]}"
    final, report = await resolve_finally(target)
    assert report.ok, f"woke to {told}\n{report.render()}"
    end = await _outcome(target, expect)
    text = (f"meanwhile: {'; '.join(meanwhile) or 'nothing to do'}; the client: {told}"
            + (f"; then {'; '.join(final)}" if final else "") + f"; end: {end}")
    matrix_rows.add_pause(PauseRow(case.group, case.title, case.point, backend, text))


#: what a woken writer whose intent was swept may answer: a timeout (its deadline passed,
#: nothing stored), which S3 clients retry; never a 500 nor a body blamed for being short
CLEAN = {"RequestTimeout"}


def judge(case: S3Case, told: Answer) -> tuple[Doc, ...]:
    """A woken server's answer: success, or a clean S3 error; what must follow."""
    if told.ok:
        return ACKNOWLEDGED[case.op]
    assert told.code in CLEAN, f"{case.op} woke at {case.point} to an unclear answer: {told}"
    return REFUSED[case.op]
