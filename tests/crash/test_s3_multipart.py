"""The crash and pause matrices of the S3 endpoint's multipart upload: boto3's
CreateMultipartUpload, UploadPart, CompleteMultipartUpload (of a new key: a create; of an
existing key: a replace) and AbortMultipartUpload sent to a real ``blobledger serve``
(:mod:`tests.crash.s3serve`) that dies (SIGKILL) or stops itself (SIGSTOP) at a failpoint
of the step; the steps before it (the upload created, its part uploaded) went through the
same server first.

Paused: while the server sleeps, the sweeper, the deletion path and ``reconcile --fix`` run
with the clock far ahead (past the upload's expiry); woken to that clock, each answer must
be a success or a clean S3 error (``NoSuchUpload``: the upload was swept; never
``InternalError``, never a lost connection); a client told its upload or part was taken
then completes the upload (``NoSuchUpload`` again, or the object), and an acknowledged
completion is read back through the endpoint. Killed: the client is never told success;
the resolvers run and the end state is the protocol's (the upload's intent swept or rolled
forward, a replace all old or all new). In both, the settled invariants hold and the store
holds exactly the blobs of ready documents.

The suite runs each pause on one backend (in turn); ``BLOBLEDGER_CRASH_MATRIX=all`` (or the
matrix's document run) runs every pause and every kill on every backend.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BACKENDS
from tests.crash.child import Target, payload
from tests.crash.conftest import make_target
from tests.crash.harness import create_ready
from tests.crash.matrix_doc import S3_GROUP, MatrixRows, PauseRow
from tests.crash.pause import WAKE_AT, resolve_finally, resolve_meanwhile
from tests.crash.s3serve import BUCKET, Answer, Served, ask, s3_client, serving
from tests.crash.test_matrix import (
    ABSENT,
    CREATED,
    NEW,
    OLD,
    REPLACED,
    UNCHANGED,
    Doc,
    _outcome,
)
from tests.crash.test_s3_endpoint import FULL, killed_row

NAME = "doc.bin"

#: the groups, by step
GROUPS = {
    "create": "CreateMultipartUpload",
    "part": "UploadPart",
    "complete": "CompleteMultipartUpload of a new key, a create",
    "complete-replace": "CompleteMultipartUpload of an existing key, a replace",
    "abort": "AbortMultipartUpload",
}


@dataclass(frozen=True)
class MultipartCase:
    step: str  # a key of GROUPS
    title: str
    point: str
    killed: tuple[Doc, ...]  # the ready documents after a kill there and the resolution
    #: a store that does not pass the point (the local disk's publication is one link)
    not_on: str = ""

    @property
    def group(self) -> str:
        return S3_GROUP + GROUPS[self.step]

    @property
    def id(self) -> str:
        return f"s3-multipart-{self.step}-{self.point}"

    def armed(self, action: str) -> str:
        return f"{self.point}={action}@1"


MULTIPART_CASES = [
    MultipartCase("create", "after C1 (the upload's rows), before its staged upload begins",
                  "multipart.after_insert", ABSENT),
    MultipartCase("part", "the part staged in the store, not yet recorded",
                  "multipart.after_stage", ABSENT),
    MultipartCase("complete", "the parts about to be published", "staged.before_commit",
                  ABSENT),
    MultipartCase("complete", "the parts published create-only, tagged pending",
                  "staged.after_commit", ABSENT, not_on="local"),
    MultipartCase("complete", "the stored bytes hashed, the SHA-256 recorded",
                  "multipart.after_verify", ABSENT),
    MultipartCase("complete", "after confirm (the key's name given)",
                  "multipart.after_confirm", ABSENT),
    MultipartCase("complete", "after C3 (tagged committed)", "multipart.after_tag", CREATED),
    MultipartCase("complete", "after C4 (committed, the upload done), its parts' rows not "
                  "yet dropped", "multipart.after_commit", CREATED),
    MultipartCase("complete-replace", "the stored bytes hashed, the SHA-256 recorded",
                  "multipart.after_verify", UNCHANGED),
    MultipartCase("complete-replace", "after R1 (row inserted)", "replace.after_insert",
                  UNCHANGED),
    MultipartCase("complete-replace", "after R3 (tagged committed)", "replace.after_tag",
                  UNCHANGED),
    MultipartCase("complete-replace", "after R4 (committed), the upload's own intent not yet "
                  "given up", "replace.after_commit", REPLACED),
    MultipartCase("abort", "the upload read, not yet terminated", "multipart.before_abort",
                  ABSENT),
    MultipartCase("abort", "terminated, its parts' rows not yet dropped",
                  "multipart.after_abort", ABSENT),
]


def multipart_in_suite(turn: int) -> list[tuple[MultipartCase, str]]:
    """Every case on every backend (``FULL``), else each on one backend, in turn."""
    def on(case: MultipartCase) -> list[str]:
        return [b for b in BACKENDS if not case.not_on or not b.endswith(f"-{case.not_on}")]

    if FULL:
        return [(case, backend) for case in MULTIPART_CASES for backend in on(case)]
    return [(case, on(case)[(i + turn) % len(on(case))])
            for i, case in enumerate(MULTIPART_CASES)]


#: the suite: every pause, one backend each; the kills (the crash matrix's SIGKILL of a
#: serve between parts is tests/s3api/test_multipart.py's) in the full form only
MULTIPART_PAUSED = multipart_in_suite(1)
MULTIPART_KILLED = multipart_in_suite(3) if FULL else []


@dataclass
class Upload:
    """The client's upload: its id and its part's ETag, once the server told them."""

    id: str = ""
    etag: str = ""
    said: list[str] = field(default_factory=list)


def _create(s3: Any, upload: Upload) -> Any:
    made = s3.create_multipart_upload(Bucket=BUCKET, Key=NAME)
    upload.id = str(made["UploadId"])
    return made


def _part(s3: Any, upload: Upload) -> Any:
    made = s3.upload_part(Bucket=BUCKET, Key=NAME, UploadId=upload.id, PartNumber=1,
                          Body=payload(NEW))
    upload.etag = str(made["ETag"])
    return made


def _complete(s3: Any, upload: Upload) -> Any:
    return s3.complete_multipart_upload(
        Bucket=BUCKET, Key=NAME, UploadId=upload.id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": upload.etag}]})


def _abort(s3: Any, upload: Upload) -> Any:
    return s3.abort_multipart_upload(Bucket=BUCKET, Key=NAME, UploadId=upload.id)


#: the request of each step, and the steps the client made before it
SENDS: dict[str, Callable[[Any, Upload], Any]] = {
    "create": _create, "part": _part, "complete": _complete, "complete-replace": _complete,
    "abort": _abort}
BEFORE: dict[str, tuple[Callable[[Any, Upload], Any], ...]] = {
    "create": (), "part": (_create,), "complete": (_create, _part),
    "complete-replace": (_create, _part), "abort": (_create, _part)}
#: what the step's success means once the client is done, and what its clean error leaves
ACKNOWLEDGED = {"create": CREATED, "part": CREATED, "complete": CREATED,
                "complete-replace": REPLACED, "abort": ABSENT}
REFUSED = {"create": ABSENT, "part": ABSENT, "complete": ABSENT,
           "complete-replace": UNCHANGED, "abort": ABSENT}
#: a woken step's clean refusals: its upload was swept while it slept (or its deadline
#: passed); never a 500 nor a lost connection
CLEAN = {"NoSuchUpload", "RequestTimeout"}


async def _prepared(case: MultipartCase, target: Target) -> None:
    if case.step == "complete-replace":
        await create_ready(target, NAME, OLD)


async def _before(served: Served, case: MultipartCase, upload: Upload) -> None:
    """The steps before the armed one, through the same server (none passes its point)."""
    client = s3_client(served.url)
    for step in BEFORE[case.step]:
        told = await asyncio.to_thread(ask, functools.partial(step, client, upload))
        assert told.ok, f"{step.__name__} before {case.point}: {told}"


async def _go_on(served: Served, case: MultipartCase, upload: Upload,
                 told: Answer) -> Answer:
    """What the client does after a woken CreateMultipartUpload or UploadPart: the rest of
    the upload (a part, the completion), stopping at the first refusal."""
    client = s3_client(served.url)
    rest = {"create": (_part, _complete), "part": (_complete,)}.get(case.step, ())
    for step in rest if told.ok else ():
        told = await asyncio.to_thread(ask, functools.partial(step, client, upload))
        upload.said.append(f"{step.__name__.strip('_')}: {told}")
        if not told.ok:
            assert told.code in CLEAN, f"{case.id}: then {step.__name__} answered {told}"
            break
    return told


@pytest.mark.parametrize(("case", "backend"), MULTIPART_PAUSED,
                         ids=[f"{c.id}-{b}" for c, b in MULTIPART_PAUSED])
async def test_s3_multipart_paused(case: MultipartCase, backend: str, tmp_path: Path,
                                   request: pytest.FixtureRequest,
                                   matrix_rows: MatrixRows) -> None:
    target = await make_target(backend, tmp_path, request)
    await _prepared(case, target)
    upload = Upload()
    async with serving(target, tmp_path / "serve.log", case.armed("stop"),
                       wake_offset=WAKE_AT) as served:
        await _before(served, case, upload)
        served.send(lambda s3: SENDS[case.step](s3, upload))
        await served.until("T")
        meanwhile = await resolve_meanwhile(target)
        served.wake()
        told = await served.answered()
        if not told.ok:
            assert told.code in CLEAN, f"{case.id} woke to an unclear answer: {told}"
        last = await _go_on(served, case, upload, told)
        expect = ACKNOWLEDGED[case.step] if last.ok else REFUSED[case.step]
        if last.ok and expect != ABSENT:  # the acknowledged object, through the endpoint
            etag, data = await served.read(NAME)
            assert data == payload(NEW), f"{case.id}: read back other bytes"
            if case.step.startswith("complete"):
                assert etag == last.etag, f"{case.id}: ETag {etag}, completion said {last.etag}"
    final, report = await resolve_finally(target)
    assert report.ok, f"woke to {told}\n{report.render()}"
    end = await _outcome(target, expect)
    then = "".join(f"; then {said}" for said in upload.said)
    text = (f"meanwhile: {'; '.join(meanwhile) or 'nothing to do'}; the client: {told}{then}"
            + (f"; then {'; '.join(final)}" if final else "") + f"; end: {end}")
    matrix_rows.add_pause(PauseRow(case.group, case.title, case.point, backend, text))


@pytest.mark.parametrize(("case", "backend"), MULTIPART_KILLED,
                         ids=[f"{c.id}-{b}" for c, b in MULTIPART_KILLED])
async def test_s3_multipart_killed(case: MultipartCase, backend: str, tmp_path: Path,
                                   request: pytest.FixtureRequest,
                                   matrix_rows: MatrixRows) -> None:
    target = await make_target(backend, tmp_path, request)
    await _prepared(case, target)
    upload = Upload()
    async with serving(target, tmp_path / "serve.log", case.armed("kill")) as served:
        await _before(served, case, upload)
        served.send(lambda s3: SENDS[case.step](s3, upload))
        code = await served.died()
        told = await served.answered()
    await killed_row(target, backend, code, told, case, case.killed, matrix_rows)
