"""Database faults under the S3 endpoint's multipart upload: the connection to PostgreSQL cut
at one statement of CreateMultipartUpload's C1 (the upload's rows), UploadPart's record of
its part, CompleteMultipartUpload's record of the object's shape (its multipart ETag and
parts, before it is visible), recorded SHA-256, confirm and C4 (the upload done), or
AbortMultipartUpload's termination (:mod:`tests.support.pgproxy`, as ``test_db_faults.py``),
each request sent through the service's own app (``tests.explore.s3writers``: signed, in
process, so the cut is armed at the step's failpoint).

The step must answer success or ``ServiceUnavailable`` (503, which S3 clients retry), never
``InternalError``; a compare-and-set step (confirm, C4) cut once answers success. Then the
client does what an S3 client does: sends the request again (a completion sent again
answers what the first one made, or makes it; an abort sent again after one that applied
finds no upload, ``NoSuchUpload``), and goes on with the upload to its end (the part, the
completion). Then the sweeper, the deletion path and the reconciler run far ahead, the
settled invariants hold, and the key holds the client's bytes (an abort: nothing).

The suite runs each COMMIT cut once, on one store each (in turn); ``BLOBLEDGER_DB_FAULTS=all``
runs every cut on every store, once and with the database staying away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import UploadState
from tests.crash.child import payload
from tests.crash.conftest import make_target
from tests.crash.harness import read_all
from tests.crash.matrix_doc import MatrixRows
from tests.crash.test_db_faults import (
    GROUPS,
    UPDATE_BLOBS,
    UPLOAD_INSERTS,
    Cut,
    answer,
    armed,
    step_cuts,
)
from tests.crash.test_db_faults_s3 import (  # noqa: F401 (proxy: a fixture)
    FULL,
    STORES,
    chunks,
    proxy,
    settled_row,
)
from tests.explore.s3writers import S3Endpoint, S3Refused
from tests.support.pgproxy import PgProxy

NAME, SIZE = "doc.bin", 128 * 1024
OLD, NEW = 1, 2
CREATE, PART = "CreateMultipartUpload", "UploadPart"
COMPLETE, REPLACE = ("CompleteMultipartUpload, a create",
                     "CompleteMultipartUpload, a replace")
ABORT = "AbortMultipartUpload"
MULTIPART_CUTS = [
    *step_cuts(CREATE, "C1 (the upload's rows)", UPLOAD_INSERTS),
    *step_cuts(PART, "the part recorded", [
        ("DELETE FROM s3_parts", r"^DELETE FROM s3_parts\b"),
        ("INSERT INTO s3_parts", r"^INSERT INTO s3_parts\b")], arm_at="multipart.after_stage"),
    *step_cuts(COMPLETE, "the object's shape", [
        ("UPDATE s3_objects", r"^UPDATE s3_objects\b"),
        ("INSERT INTO s3_objects", r"^INSERT INTO s3_objects\b")]),
    *step_cuts(COMPLETE, "record_verified", [
        ("UPDATE uploads", r"^UPDATE uploads SET sha256\b")]),
    *step_cuts(COMPLETE, "confirm", [("UPDATE blobs", UPDATE_BLOBS)],
               arm_at="multipart.after_verify"),
    *step_cuts(COMPLETE, "C4 (the upload done)", [
        ("UPDATE blobs", UPDATE_BLOBS), ("UPDATE documents", r"^UPDATE documents\b"),
        ("UPDATE uploads", r"^UPDATE uploads SET state\b")], arm_at="multipart.after_tag"),
    *step_cuts(REPLACE, "the object's shape after R1", [
        ("INSERT INTO s3_objects", r"^INSERT INTO s3_objects\b")], arm_at="replace.after_insert"),
    *step_cuts(REPLACE, "R4", [
        ("UPDATE blobs", UPDATE_BLOBS), ("UPDATE documents", r"^UPDATE documents\b")],
        arm_at="replace.after_tag"),
    *step_cuts(ABORT, "the termination", [], arm_at="multipart.before_abort"),
]
#: the steps that, cut once, answer success (a compare-and-set tried again)
ANSWERED = {"confirm", "C4 (the upload done)", "R4"}
EVERY = [(c, s, t) for t in GROUPS for c in MULTIPART_CUTS for s in STORES]
#: the suite: each COMMIT cut once, on one store each, in turn
MULTIPART_MATRIX = EVERY if FULL else [
    (cut, STORES[i % len(STORES)], 1)
    for i, cut in enumerate(c for c in MULTIPART_CUTS if c.commit)]


def case_id(cut: Cut, store: str, times: int) -> str:
    op = {CREATE: "create", PART: "part", COMPLETE: "complete", REPLACE: "complete-replace",
          ABORT: "abort"}[cut.op]
    return (f"multipart-{op}-{cut.id.split('-', 1)[1]}-{store}"
            f"{'-stays' if times > 1 else ''}")


@dataclass
class Flow:
    """The client's upload: its id and its part's ETag, as the endpoint told them."""

    upload_id: str = ""
    etag: str = ""


async def _create(s3: S3Endpoint, flow: Flow) -> Any:
    flow.upload_id = await s3.create_upload(NAME)
    return flow.upload_id


async def _part(s3: S3Endpoint, flow: Flow) -> Any:
    flow.etag = await s3.upload_part(NAME, flow.upload_id, 1, payload(NEW, SIZE))
    return flow.etag


async def _complete(s3: S3Endpoint, flow: Flow) -> Any:
    return await s3.complete(NAME, flow.upload_id, [(1, flow.etag)])


async def _abort(s3: S3Endpoint, flow: Flow) -> Any:
    await s3.abort(NAME, flow.upload_id)


Step = Callable[[S3Endpoint, Flow], Awaitable[Any]]
#: the steps before the one cut, the one cut, and those after it
STEPS: dict[str, tuple[tuple[Step, ...], Step, tuple[Step, ...]]] = {
    CREATE: ((), _create, (_part, _complete)),
    PART: ((_create,), _part, (_complete,)),
    COMPLETE: ((_create, _part), _complete, ()),
    REPLACE: ((_create, _part), _complete, ()),
    ABORT: ((_create, _part), _abort, ()),
}


@pytest.mark.parametrize(("cut", "store", "times"), MULTIPART_MATRIX,
                         ids=[case_id(*case) for case in MULTIPART_MATRIX])
async def test_db_fault_s3_multipart(cut: Cut, store: str, times: int, tmp_path: Path,
                                     request: pytest.FixtureRequest, proxy: PgProxy,  # noqa: F811
                                     matrix_rows: MatrixRows) -> None:
    direct = await make_target(f"postgresql-{store}", tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    before, step, after = STEPS[cut.op]
    flow = Flow()
    async with target.ledger() as ledger:
        if cut.op == REPLACE:
            await ledger.create(NAME, chunks(payload(OLD, SIZE)))
        endpoint = S3Endpoint(ledger, ledger.settings)
        try:
            for earlier in before:
                await earlier(endpoint, flow)
            with armed(proxy, cut, times):
                first = await answer(step(endpoint, flow))
            assert proxy.fired, f"the cut at {cut.statement} never fired: {proxy.statements}"
            assert not isinstance(first, Exception) or isinstance(first, S3Refused), (
                f"the endpoint answered {first!r}")
            if isinstance(first, S3Refused):
                assert first.code == "ServiceUnavailable", f"the endpoint answered {first}"
            if times == 1 and cut.step in ANSWERED:
                assert not isinstance(first, Exception), f"the step answered {first!r}"
            proxy.disarm()
            retry = await _again(cut.op, step, endpoint, flow, first)
            if cut.op == ABORT:  # acknowledged: no part nor completion may follow
                left_open = await ledger.transitions.find_upload(flow.upload_id)
                assert left_open is None or left_open.state != UploadState.OPEN, (
                    "an acknowledged abort left its upload open")
            for later in after:
                await later(endpoint, flow)
        finally:
            await endpoint.close()
    await settled_row(target, cut, store, times, _told(first), retry, _ended, matrix_rows)


def _told(first: Any) -> str:
    if isinstance(first, S3Refused):
        return f"`{first.code}` ({first.status})"
    if isinstance(first, Exception):
        return f"`{type(first).__name__}`"
    return "acknowledged" + (f" v{first.version}" if isinstance(first, Document) else "")


async def _again(op: str, step: Step, endpoint: S3Endpoint, flow: Flow, first: Any) -> str:
    """The client's request sent again if it was not acknowledged (once: the database is
    back)."""
    if not isinstance(first, Exception):
        return "not needed (acknowledged)"
    try:
        await step(endpoint, flow)
    except S3Refused as exc:  # an abort that applied before its connection was cut
        assert op == ABORT and exc.code == "NoSuchUpload", f"the retry got {exc}"
        return f"`{exc.code}` (the first attempt's termination applied)"
    return "acknowledged"


async def _ended(op: str, ledger: Ledger) -> str:
    docs = [d async for d in ledger.list()]
    if op == ABORT:
        assert docs == [], docs
        return "no document"
    assert [d.name for d in docs] == [NAME], docs
    assert await read_all(ledger, docs[0].id) == payload(NEW, SIZE)
    return f"{NAME} v{docs[0].version} (the client's bytes)"
