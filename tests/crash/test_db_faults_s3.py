"""Database faults under the S3 endpoint's writers: the connection to PostgreSQL cut at one
statement of PutObject's create (C1, C4) or replace (R1, R4), or of DeleteObject's
transaction (:mod:`tests.support.pgproxy`, as ``test_db_faults.py``), the request sent
through the service's own app (``tests.explore.s3writers``: signed, in process, so the cut is
armed at the step's failpoint).

The writer must answer success or ``ServiceUnavailable`` (503, which S3 clients retry), never
``InternalError``; a compare-and-set step (C4, R4) cut once answers success. Then the client
does what an S3 client does: sends its request again (a PUT has no idempotency key: while
the first attempt's intent holds the key the retry is ``OperationAborted``, and once the
sweeper has resolved that intent, past its cutoff, the retry succeeds). Then the sweeper,
the deletion path and the reconciler run far ahead, the settled invariants hold, and the key
holds the client's bytes (a delete: nothing). ``BLOBLEDGER_DB_FAULTS=all`` runs every cut on
every store, once and with the database staying away; the suite runs the COMMITs on the
local disk.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from blobledger.protocol.documents import Document
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import check
from blobledger.workers.sweeper import Sweeper
from tests.crash.child import payload
from tests.crash.conftest import make_target
from tests.crash.harness import RESOLVE_AT, describe, read_all, settle, summary
from tests.crash.matrix_doc import S3_GROUP, DbFaultRow, MatrixRows
from tests.crash.test_db_faults import (
    GROUPS,
    UPDATE_BLOBS,
    Cut,
    answer,
    armed,
    statement_cuts,
    step_cuts,
)
from tests.explore.s3writers import S3Endpoint, S3Refused
from tests.support.pgproxy import PgProxy

NAME, SIZE = "doc.bin", 128 * 1024
OLD, NEW = 1, 2
FULL = os.environ.get("BLOBLEDGER_DB_FAULTS") == "all"
CUTS = [
    # a create without an idempotency key: C1 is one statement, in autocommit
    *statement_cuts("PutObject, a create", "C1, one statement",
                    "WITH c1_document AS (INSERT INTO documents) INSERT INTO blobs",
                    r"^WITH c1_document\b"),
    *step_cuts("PutObject, a create", "C4", [
        ("UPDATE blobs", UPDATE_BLOBS), ("UPDATE documents", r"^UPDATE documents\b")],
        arm_at="create.after_tag"),
    *step_cuts("PutObject, a replace", "R1", [("INSERT INTO blobs", r"^INSERT INTO blobs\b")]),
    *step_cuts("PutObject, a replace", "R4", [
        ("UPDATE blobs", UPDATE_BLOBS), ("UPDATE documents", r"^UPDATE documents\b"),
        ("UPDATE blobs", UPDATE_BLOBS, 2)], arm_at="replace.after_tag"),
    *step_cuts("DeleteObject", "(one transaction)", [
        ("DELETE FROM documents", r"^DELETE FROM documents\b"),
        ("UPDATE blobs", UPDATE_BLOBS)]),
]
STORES = ["local", "azure", "s3"]
EVERY = [(c, s, t) for t in GROUPS for c in CUTS for s in STORES]
#: the suite: every COMMIT and the one-statement C1, cut once, on the local disk
MATRIX = [(c, s, t) for c, s, t in EVERY
          if FULL or (s == "local" and t == 1 and (c.commit or c.step.startswith("C1")))]


def case_id(cut: Cut, store: str, times: int) -> str:
    op = {"PutObject, a create": "put-create", "PutObject, a replace": "put-replace"}.get(
        cut.op, "delete")
    return f"{op}-{cut.id.split('-', 1)[1]}-{store}{'-stays' if times > 1 else ''}"


@pytest.fixture
def proxy(pg_url: str) -> Iterator[PgProxy]:
    with PgProxy(make_url(pg_url).port or 5432) as running:
        yield running


@pytest.mark.parametrize(("cut", "store", "times"), MATRIX,
                         ids=[case_id(*case) for case in MATRIX])
async def test_db_fault_s3(cut: Cut, store: str, times: int, tmp_path: Path,
                           request: pytest.FixtureRequest, proxy: PgProxy,
                           matrix_rows: MatrixRows) -> None:
    direct = await make_target(f"postgresql-{store}", tmp_path, request)
    target = dataclasses.replace(direct, database_url=proxy.url(direct.database_url))
    async with target.ledger() as ledger:
        if cut.op != "PutObject, a create":
            await ledger.create(NAME, chunks(payload(OLD, SIZE)))
        endpoint = S3Endpoint(ledger, ledger.settings)
        try:
            with armed(proxy, cut, times):
                first = await answer(SENDS[cut.op](endpoint))
            assert proxy.fired, f"the cut at {cut.statement} never fired: {proxy.statements}"
            assert not isinstance(first, Exception) or isinstance(first, S3Refused), (
                f"the endpoint answered {first!r}")
            if isinstance(first, S3Refused):
                assert first.code == "ServiceUnavailable", f"the endpoint answered {first}"
            if times == 1 and cut.answered:
                assert not isinstance(first, Exception), f"the writer answered {first!r}"
            proxy.disarm()
            retry = await again(cut.op, endpoint, ledger, first)
        finally:
            await endpoint.close()
    await settled_row(target, cut, store, times, told(first), retry, ended, matrix_rows)


async def settled_row(target: Any, cut: Any, store: str, times: int, answer: str, retry: str,
                      end_of: Callable[[str, Ledger], Awaitable[str]],
                      matrix_rows: MatrixRows) -> None:
    """After a cut: the workers settle what it left, the invariants hold (settled), and the
    matrix's row records the writer's answer, its retry's, the steps and what is left."""
    async with target.ledger(clock_offset=RESOLVE_AT) as ledger:
        steps = await settle(ledger)
        report = await check(ledger, settled=True)
        assert report.ok, report.render()
        end = await end_of(cut.op, ledger)
        left = await describe(ledger)
    matrix_rows.add_db_fault(DbFaultRow(
        S3_GROUP + GROUPS[times].split(": ", 1)[1], cut.op, cut.step, cut.title,
        f"postgresql-{store}", answer, retry,
        "; ".join([*steps, end]) if steps else f"nothing to do; {end}", left))


async def chunks(data: bytes) -> Any:
    yield data


SENDS: dict[str, Callable[[S3Endpoint], Awaitable[Any]]] = {
    "PutObject, a create": lambda s3: s3.put(NAME, payload(NEW, SIZE), create_only=False),
    "PutObject, a replace": lambda s3: s3.put(NAME, payload(NEW, SIZE), create_only=False),
    "DeleteObject": lambda s3: s3.delete(NAME),
}


def told(first: Any) -> str:
    if isinstance(first, S3Refused):
        return f"`{first.code}` ({first.status})"
    if isinstance(first, Exception):
        return f"`{type(first).__name__}`"
    return "acknowledged" + (f" v{first.version}" if isinstance(first, Document) else "")


async def again(op: str, endpoint: S3Endpoint, ledger: Ledger, first: Any) -> str:
    """The client's request sent again if it was not acknowledged: at once, and if the key
    is still held by the first attempt's intent (``OperationAborted``), once the sweeper
    has resolved that intent past its cutoff."""
    if not isinstance(first, Exception):
        return "not needed (acknowledged)"
    said = []
    for attempt in range(2):
        try:
            await SENDS[op](endpoint)
            said.append("acknowledged")
            break
        except S3Refused as exc:
            assert exc.code == "OperationAborted" and attempt == 0, f"the retry got {exc}"
            said.append(f"`{exc.code}`")
            ledger.clock_offset = RESOLVE_AT
            swept = ", ".join(d for d in summary(await Sweeper(ledger).run_once())
                              if not d.startswith(("claimed", "batches")))
            said.append(f"after the sweep ({swept or 'nothing to do'})")
    return "; ".join(said)


async def ended(op: str, ledger: Ledger) -> str:
    docs = [d async for d in ledger.list()]
    if op == "DeleteObject":
        assert docs == [], docs
        return "no document"
    assert [d.name for d in docs] == [NAME], docs
    assert await read_all(ledger, docs[0].id) == payload(NEW, SIZE)
    return f"{NAME} v{docs[0].version} (the client's bytes)"
