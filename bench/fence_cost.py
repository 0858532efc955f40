"""What the writer's ownership check before the tag flip (``Transitions.confirm``: the
blob row is still ``pending`` with this attempt's token, its lease extended) costs on
PostgreSQL, and what the same compare-and-set costs as one statement in autocommit, with
and without the pool's pre-ping. The same UPDATE, the same rows, interleaved; sequential
(latency per confirm) and 16 at once. No target: the figures behind a proposal.

Then a whole create (C1, the local-disk upload, C4) with PostgreSQL 2 ms away (a TCP proxy
holding each of the server's answers 2 ms), one at a time: with the pool's pre-ping (as the
ledger was), without it (the ledger now: the transaction's BEGIN finds a dead connection;
an unkeyed C1 is one statement), and without it under the deferred retag (C1 and C4 one
statement each, no confirm), the three interleaved; ms per create and the server's answers
per create (the round trips)."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from tests.support.threaded import ThreadedServer

from bench.common import Context, Result
from blobledger._base.names import new_blob_name, new_document_id
from blobledger.config import Settings
from blobledger.db import Database, normalise_url
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.migrate import migrate_database
from blobledger.protocol.models import BlobKind
from blobledger.protocol.transitions import Intent, Transitions, new_token
from blobledger.protocol.transitions.statements import _confirm
from blobledger.stores.local import LocalStore

TITLE = "the fence's confirm step on PostgreSQL: BEGIN/UPDATE/COMMIT vs one statement"
#: the round-trip time added in front of PostgreSQL for the create case
CREATE_RTT_MS = 2.0


@dataclass
class DelayingProxy(ThreadedServer):
    """A TCP proxy that holds each chunk of the server's answer ``delay`` seconds (order
    kept) and counts them: with a client that waits for each answer (asyncpg), one chunk per
    round trip."""

    thread_name = "pg delay proxy"
    upstream_port: int
    delay: float
    port: int = 0
    answers: int = 0

    def __post_init__(self) -> None:
        self._init_server()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def receive() -> None:
            while data := await up_reader.read(65536):
                self.answers += 1
                queue.put_nowait((time.perf_counter() + self.delay, data))
            queue.put_nowait((0.0, b""))

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                writer.write(data)
                await writer.drain()
            writer.close()

        tasks = [asyncio.ensure_future(t()) for t in (upstream, receive, deliver)]
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks)
        for task in tasks:
            task.cancel()


async def create_round_trips(ctx: Context) -> list[Result]:
    """Creates one at a time at :data:`CREATE_RTT_MS`: pre-ping (before) against none, inline
    and deferred."""
    n = 20 if ctx.quick else 60
    with DelayingProxy(make_url(ctx.postgres_url).port or 5432, CREATE_RTT_MS / 1000) as proxy:
        url = make_url(ctx.postgres_url).set(host="127.0.0.1", port=proxy.port
                                             ).render_as_string(hide_password=False)
        pinging = create_async_engine(normalise_url(url), pool_size=10, max_overflow=20,
                                      pool_pre_ping=True)
        with tempfile.TemporaryDirectory(prefix="bench-fence-") as root:
            disk = LocalStore(root)
            settings = Settings(database_url=url, store_url=disk.url)
            pinged = Database(url, engine=pinging)
            pinged.version_table = "alembic_version"  # the ledger's own database
            ledgers = {"pre-ping (before)": Ledger(pinged, disk, settings),
                       "no pre-ping (now)": Ledger(Database(url), disk, settings),
                       "no pre-ping, retag deferred (now)": Ledger(
                           Database(url), disk, settings.with_(retag="deferred"))}
            ms: dict[str, list[float]] = {k: [] for k in ledgers}
            answers: dict[str, list[float]] = {k: [] for k in ledgers}
            try:
                for ledger in ledgers.values():
                    await ledger.connect()
                    for i in range(3):  # warm-up: the pool, the statement caches
                        await ledger.create(f"warm-{time.time_ns()}-{i}.bin", b"x" * 4096,
                                            content_type="application/octet-stream")
                for _ in range(max(ctx.repeats, 3)):
                    for name, ledger in ledgers.items():
                        before, started = proxy.answers, time.perf_counter()
                        for i in range(n):
                            await ledger.create(f"c-{time.time_ns()}-{i}.bin", b"x" * 4096,
                                                content_type="application/octet-stream")
                        ms[name].append((time.perf_counter() - started) / n * 1000)
                        answers[name].append((proxy.answers - before) / n)
            finally:
                for ledger in ledgers.values():
                    await ledger.close()
                await pinging.dispose()
    base = "pre-ping (before)"
    return [Result(
        case=f"create @{CREATE_RTT_MS:g}ms (PostgreSQL), {name}",
        figure_name="ms per create, one at a time", figure=statistics.median(ms[name]),
        baseline_name="with pre-ping", baseline=statistics.median(ms[base]), unit="ms",
        better="lower", target=None,
        detail=f"{statistics.median(answers[name]):.1f} server answers (round trips) per "
               f"create (with pre-ping {statistics.median(answers[base]):.1f})")
        for name in ledgers]


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
    pinging = create_async_engine(normalise_url(ctx.postgres_url), pool_size=10,
                                  max_overflow=20, pool_pre_ping=True)
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
        pinging_autocommit = pinging.execution_options(isolation_level="AUTOCOMMIT")

        async def today(intent: Intent) -> None:
            assert await transitions.confirm(intent)

        def one_statement(engine: object) -> Callable[[Intent], Awaitable[None]]:
            async def confirm(intent: Intent) -> None:
                async with engine.connect() as conn:  # type: ignore[attr-defined]
                    result = await conn.execute(_confirm, dict(
                        b_name=intent.blob_name, b_attempt=intent.attempt, **times))
                    assert result.rowcount == 1
            return confirm

        async def ping_transaction(intent: Intent) -> None:
            async with pinging.begin() as conn:
                result = await conn.execute(_confirm, dict(
                    b_name=intent.blob_name, b_attempt=intent.attempt, **times))
                assert result.rowcount == 1

        ways: dict[str, Callable[[Intent], Awaitable[None]]] = {
            "BEGIN/UPDATE/COMMIT (today)": today,
            "one UPDATE in autocommit": one_statement(autocommit),
            "BEGIN/UPDATE/COMMIT, pool pre-ping (before)": ping_transaction,
            "one UPDATE in autocommit, pool pre-ping": one_statement(pinging_autocommit),
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
        await pinging.dispose()
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
    return results + await create_round_trips(ctx)
