"""What the writer's ownership check before the tag flip (``Transitions.confirm``: the
blob row is still ``pending`` with this attempt's token, its lease extended) costs on
PostgreSQL, and what the same compare-and-set costs as one statement in autocommit, with
and without the pool's pre-ping. The same UPDATE, the same rows, interleaved; sequential
(latency per confirm) and 16 at once. No target: the figures behind a proposal."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import create_async_engine

from bench.common import Context, Result
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.config import Settings
from blobledger.db import Database, normalise_url
from blobledger.protocol.migrate import migrate_database
from blobledger.protocol.models import BlobKind
from blobledger.protocol.transitions import Intent, Transitions, _confirm, new_token

TITLE = "the fence's confirm step on PostgreSQL: BEGIN/UPDATE/COMMIT vs one statement"


async def sixteen_at_once(way: Callable[[Intent], Awaitable[None]], intents: list[Intent]
                          ) -> None:
    queue = iter(intents)

    async def worker() -> None:
        for intent in queue:
            await way(intent)

    await asyncio.gather(*(worker() for _ in range(16)))


async def run(ctx: Context) -> list[Result]:
    n = 100 if ctx.quick else 400
    db = Database(ctx.postgres_url)
    plain = create_async_engine(normalise_url(ctx.postgres_url), pool_size=10, max_overflow=20)
    try:
        await migrate_database(db)
        settings = Settings(database_url=ctx.postgres_url)
        transitions = Transitions(db, settings)
        intents = []
        for i in range(n):
            intent = Intent(new_blob_name("documents", "x.bin"), new_document_id(),
                            BlobKind.CREATE, new_token(), "application/octet-stream")
            await transitions.begin_create(intent, f"fence-{i}", None)
            intents.append(intent)
        times = transitions.times(lease=settings.upload_deadline)
        autocommit = db.engine.execution_options(isolation_level="AUTOCOMMIT")
        plain_autocommit = plain.execution_options(isolation_level="AUTOCOMMIT")

        async def today(intent: Intent) -> None:
            assert await transitions.confirm(intent)

        def one_statement(engine: object) -> Callable[[Intent], Awaitable[None]]:
            async def confirm(intent: Intent) -> None:
                async with engine.connect() as conn:  # type: ignore[attr-defined]
                    result = await conn.execute(_confirm, dict(
                        b_name=intent.blob_name, b_attempt=intent.attempt, **times))
                    assert result.rowcount == 1
            return confirm

        async def no_ping_transaction(intent: Intent) -> None:
            async with plain.begin() as conn:
                result = await conn.execute(_confirm, dict(
                    b_name=intent.blob_name, b_attempt=intent.attempt, **times))
                assert result.rowcount == 1

        ways: dict[str, Callable[[Intent], Awaitable[None]]] = {
            "BEGIN/UPDATE/COMMIT (today)": today,
            "one UPDATE in autocommit": one_statement(autocommit),
            "BEGIN/UPDATE/COMMIT, no pre-ping": no_ping_transaction,
            "one UPDATE in autocommit, no pre-ping": one_statement(plain_autocommit),
        }
        for way in ways.values():  # warm-up: connections, statement caches
            for intent in intents[:20]:
                await way(intent)
        sequential: dict[str, list[float]] = {k: [] for k in ways}
        concurrent: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(max(ctx.repeats, 3)):
            for name, way in ways.items():
                started = time.perf_counter()
                for intent in intents:
                    await way(intent)
                sequential[name].append((time.perf_counter() - started) / n * 1000)
            for name, way in ways.items():
                started = time.perf_counter()
                await sixteen_at_once(way, intents)
                concurrent[name].append(n / (time.perf_counter() - started))
    finally:
        await plain.dispose()
        await db.dispose()
    base = "BEGIN/UPDATE/COMMIT (today)"
    results = []
    for name in ways:
        results.append(Result(
            case=f"confirm: {name}", figure_name="ms per confirm, one at a time",
            figure=statistics.median(sequential[name]), baseline_name="today's ms per confirm",
            baseline=statistics.median(sequential[base]), unit="ms", better="lower",
            target=None,
            detail=f"{statistics.median(concurrent[name]):.0f} confirms/s at 16 concurrent "
                   f"(today {statistics.median(concurrent[base]):.0f})"))
    return results
