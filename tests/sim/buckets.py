"""Bucket deletion racing creates: a bucket made, then creates into it from two processes
and the bucket's deletion from a third, at once (the deletion a moment later or not).

Both outcomes of the deletion are legal, ``BucketNotEmpty`` (a create got there first) and
success (then the creates that had not are told ``BucketNotFound``, or another error they
may retry), as is ``BucketNotFound`` for a create. What is not: a deletion answered success
beside a create answered a document (the document would live in a bucket that is gone), or
any document row left in the bucket once its deletion was answered. Acknowledged documents
join the model (read back at the checks).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from blobledger.protocol.models import DocumentRow

if TYPE_CHECKING:
    from tests.sim.sim import _Run

_documents = DocumentRow.__table__


async def bucket_racer(run: _Run, n: int) -> None:
    """Rounds of a bucket made, then two creates into it and its deletion at once."""
    from tests.sim.sim import _short

    sides = [run.ledger(), run.ledger(), run.ledger()]
    for i in range(run.config.ops):
        bucket = f"bk{n}-{i}"
        outcome, value = await run.op(f"b{n}.bucket", lambda: sides[0].buckets.create(
            bucket))  # noqa: B023
        run.note(f"b{n} bucket {bucket}: {outcome} {_short(value)}")
        if outcome == "ok":
            await _race(run, n, sides, bucket)


async def _race(run: _Run, n: int, sides: list[Any], bucket: str) -> None:
    from tests.sim.sim import Doc, Violation, _short

    creates = []
    for k, side in enumerate(sides[:2]):
        data = f"b{n} {bucket} {k} {run.rng.getrandbits(32)}".encode()

        def create(side: Any = side, data: bytes = data, k: int = k) -> Any:
            return side.create(f"o{k}", data, content_type="text/plain", bucket=bucket)

        creates.append((hashlib.sha256(data).hexdigest(), run.op(f"b{n}.create{k}", create)))
    delay = run.rng.choice((0.0, 0.0, 0.5, 2.0))

    async def delete() -> None:
        await asyncio.sleep(delay)
        await sides[2].buckets.delete(bucket)

    answers = await asyncio.gather(*(op for _, op in creates), run.op(f"b{n}.delete", delete))
    run.note(f"b{n} {bucket} creates and deletion: "
             + ", ".join(f"{o} {_short(v)}" for o, v in answers))
    made = [(sha, v) for (sha, _), (o, v) in zip(creates, answers, strict=False) if o == "ok"]
    for sha, doc in made:
        run.result.acknowledged += 1
        if doc.sha256 != sha:
            raise Violation(f"a create in {bucket} answered {doc.sha256}, sent {sha}")
        run.docs.setdefault(doc.id, Doc(doc.id, doc.version, sha))
    if answers[-1][0] != "ok":
        return
    if made:
        raise Violation(f"bucket {bucket}: its deletion answered success beside a create "
                        f"answered {made[0][1].id}")
    async with sides[2].db.transaction(readonly=True) as conn:
        left = (await conn.execute(select(func.count()).select_from(_documents).where(
            _documents.c.bucket == bucket))).scalar_one()
    if left:
        raise Violation(f"bucket {bucket}: deleted, {left} document row(s) left in it")
