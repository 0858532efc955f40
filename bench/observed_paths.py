"""``python -m bench.observed_paths``: this process's CPU per one-statement step on
PostgreSQL (``Database.fetch_one``, and ``fetch_each``'s batches of 4), on the driver's path
(no listener on the engine) and on the SQLAlchemy path an observed engine takes
(``Database.observed``): with one no-op ``before_cursor_execute`` listener, and with
OpenTelemetry's SQLAlchemy instrumentation on an SDK tracer provider whose spans go nowhere
(a processor that drops them), which is what tracing costs beside the spans' export.

The statement is an insert of one row with RETURNING into a table of its own, the shape of
C1's; each path is timed ``--n`` statements (``time.process_time``), the paths alternating
``--repeats`` times (medians). Not a case of ``python -m bench``: it measures one layer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from typing import Any

from sqlalchemy import Column, Integer, MetaData, Table, Text, bindparam, event, insert

from blobledger import telemetry
from blobledger.db import Database

URL = os.environ.get("BLOBLEDGER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def timed(db: Database, add: Any, n: int, batch: int, start: int) -> float:
    """CPU ms per statement (per run, for batches) over ``n`` of them."""
    began = time.process_time()
    if batch == 1:
        for i in range(n):
            await db.fetch_one(add, {"x": start + i, "y": "y"})
    else:
        for i in range(0, n, batch):
            await db.fetch_each(add, [{"x": start + i + j, "y": "y"} for j in range(batch)])
    return (time.process_time() - began) / n * 1000


async def main_async(args: argparse.Namespace) -> int:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    name = f"bench_{uuid.uuid4().hex[:12]}"
    rows = Table(name, MetaData(), Column("x", Integer, primary_key=True), Column("y", Text))
    add = insert(rows).values(x=bindparam("x"), y=bindparam("y")).returning(rows.c.x)
    plain, listened, traced = Database(URL), Database(URL), Database(URL)
    event.listen(listened.engine.sync_engine, "before_cursor_execute", lambda *_: None)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Dropped()))
    telemetry.enable(provider)
    telemetry.instrument_engine(traced.engine)
    paths = {"driver": plain, "listener": listened, "otel": traced}
    assert not plain.observed() and listened.observed() and traced.observed()
    async with plain.transaction() as conn:
        await conn.run_sync(rows.metadata.create_all)
    found: dict[tuple[str, int], list[float]] = {}
    start = 0
    try:
        for batch in (1, 4):
            for db in paths.values():  # warm: connections, prepared statements
                await timed(db, add, 200, batch, start)
                start += 200
            for _ in range(args.repeats):
                for path, db in paths.items():
                    found.setdefault((path, batch), []).append(
                        await timed(db, add, args.n, batch, start))
                    start += args.n
    finally:
        async with plain.transaction() as conn:
            await conn.run_sync(rows.metadata.drop_all)
        for db in paths.values():
            await db.dispose()
        telemetry.disable()
    print(f"CPU ms per statement (median of {args.repeats}, {args.n} each; load "
          f"{os.getloadavg()[0]:.1f})")
    print(f"{'':10}{'alone':>8}{'batch of 4, per run':>22}")
    for path in paths:
        print(f"{path:10}{statistics.median(found[(path, 1)]):>8.3f}"
              f"{statistics.median(found[(path, 4)]):>22.3f}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="statements per trial")
    parser.add_argument("--repeats", type=int, default=5)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
