"""The interleaving explorer: a model-based state machine (hypothesis) over one in-process
ledger in which client operations run as asyncio tasks that stop at every protocol step
(the failpoints, through :func:`blobledger.failpoints.set_hook`) and are resumed later,
interleaved with sweeps (which include the deletion path), ``reconcile --fix`` and jumps of
the clock.

After every step the invariants I1, I3 and I5 hold (:func:`blobledger.invariants.check`; I4
at a settle step, once every operation has finished and the clock is past every cutoff), and
every answer a client got agrees with a simple model:

- an acknowledged create or replace is readable with its bytes until an acknowledged later
  change of that document; an acknowledged delete is gone;
- a failed operation changed nothing visible, and it failed with a clear error (a
  ``BlobLedgerError``, never a storage error);
- a retry under an idempotency key returns the first response under that key (id, version,
  SHA-256).

What is visible while an operation is suspended may be that operation's own effect (a
replace suspended after R4 already shows its version); the model allows exactly the effects
of the operations still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import itertools
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import text

from blobledger import failpoints
from blobledger.config import Settings
from blobledger.db import Database
from blobledger.documents import Document
from blobledger.errors import (
    BlobLedgerError,
    IdempotencyConflict,
    StoreError,
    StoreUnavailable,
    SweeperBusy,
)
from blobledger.invariants import check
from blobledger.ledger import Ledger
from blobledger.reconciler import reconcile
from blobledger.stores import Store
from blobledger.stores.azure import AzureStore
from blobledger.stores.local import LocalStore
from blobledger.sweeper import SWEEP_LEASE, Sweeper, SweepReport
from tests.support.clock import set_clock_offset
from tests.support.services import create_database, drop_database

T = TypeVar("T")
SETTINGS = {"upload_deadline": 60.0, "sweep_after": 180.0, "delete_grace": 30.0}
#: clock jumps: past the grace, past the upload deadline, past sweep_after, an hour
JUMPS = (31.0, 61.0, 181.0, 3600.0)
#: jumps stop here, well inside the retention of idempotency keys (24 h)
MAX_OFFSET = 12 * 3600.0
#: a settle moves the clock this far: past sweep_after, the grace and a sweeper's lease
SETTLE_JUMP = SETTINGS["sweep_after"] + SETTINGS["delete_grace"] + SWEEP_LEASE + 1
NAMES = ("a", "b")
#: the longest an operation may take to reach its next step (or its end)
STEP_TIMEOUT = 30.0
#: errors that must never reach a client of a paused or interleaved operation
UNCLEAR = (StoreError, StoreUnavailable)


class Violation(AssertionError):
    """The ledger broke an invariant or gave an answer the model cannot explain."""


# -- backends ----------------------------------------------------------------------------


class Backend:
    """Where each example's ledger lives; every example starts from empty tables and store."""

    name = ""

    async def start(self) -> None:
        """Once per run: what every example reuses (a migrated template, a database)."""

    async def fresh(self, settings: Settings) -> Ledger:
        raise NotImplementedError

    async def stop(self) -> None:
        """Once per run: remove what :meth:`start` made."""


class SqliteLocal(Backend):
    """A SQLite file copied from a migrated template and a fresh folder, per example."""

    name = "sqlite-local"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.template = root / "template.db"
        self.count = itertools.count()

    async def start(self) -> None:
        db = Database(f"sqlite:///{self.template}")
        await db.migrate()
        await db.dispose()

    async def fresh(self, settings: Settings) -> Ledger:
        n = next(self.count)
        path = self.root / f"example-{n}.db"
        shutil.copyfile(self.template, path)
        store = LocalStore(self.root / f"store-{n}")
        url = f"sqlite:///{path}"
        return Ledger(Database(url), store, settings.with_(database_url=url,
                                                           store_url=store.url),
                      migrate=False)


class PostgresAzure(Backend):
    """One migrated PostgreSQL database, emptied per example, and a new Azurite container
    per example (small single-put and block sizes, so uploads are staged in blocks).
    Without ``database_url`` a database is created for the run and dropped after it."""

    name = "postgresql-azure"

    def __init__(self, connection_string: str, database_url: str | None = None) -> None:
        self.connection_string = connection_string
        self.database_url = database_url or ""
        self.own_database = database_url is None

    async def start(self) -> None:
        if self.own_database:
            self.database_url = await create_database()
            db = Database(self.database_url)
            await db.migrate()
            await db.dispose()

    async def stop(self) -> None:
        if self.own_database:
            await drop_database(self.database_url)

    async def fresh(self, settings: Settings) -> Ledger:
        db = Database(self.database_url)
        async with db.session() as session:
            tables = (await session.execute(text(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename <> 'alembic_version'"))).scalars().all()
            await session.execute(text("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)))
        store: Store = AzureStore(f"x{uuid.uuid4().hex[:20]}",
                                  connection_string=self.connection_string,
                                  single_put_limit=256, block_size=256)
        return Ledger(db, store, settings.with_(database_url=self.database_url,
                                                store_url=store.url), migrate=False)


# -- operations --------------------------------------------------------------------------

_CURRENT: contextvars.ContextVar[Op | None] = contextvars.ContextVar("op", default=None)


async def _suspend_here(point: str) -> None:
    """The failpoint hook: the operation running in this task (if any) stops at ``point``."""
    op = _CURRENT.get()
    if op is not None:
        await op.suspend(point)


@dataclass(eq=False)
class Op:
    """One client operation, run as a task that stops at every failpoint it reaches."""

    n: int
    kind: str  # create | retry | replace | delete | sweeper
    doc_id: str | None = None  # replace, delete
    name: str | None = None  # create, retry
    expected: int | None = None  # replace, delete
    key: str | None = None  # create (keyed), retry
    data: bytes = b""
    group: int = 0  # creations sharing a key (and bytes) share a group
    #: a retry: the first answer under its key when it started (it must get that again)
    first: tuple[str, int, str] | None = None
    other_bytes: bool = False  # a retry under the key with bytes of its own (or its retry)
    task: asyncio.Task[Document | None] | None = None
    point: str | None = None  # where it is stopped now
    points: list[str] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def label(self) -> str:
        what = {"create": f"create({self.name!r}{', keyed' if self.key else ''})",
                "retry": f"retry({self.name!r}, key {self.key}"
                         + (", other bytes)" if self.other_bytes else ")"),
                "replace": f"replace({self.doc_id}, v{self.expected})",
                "delete": f"delete({self.doc_id}, v{self.expected})",
                "sweeper": "sweeper run"}[self.kind]
        return f"op{self.n} {what}"

    async def suspend(self, point: str) -> None:
        self.point = point
        self.points.append(point)
        self.arrived.set()
        await self.go.wait()
        self.go.clear()
        self.point = None

    async def advance(self, *, resume: bool = True) -> None:
        """Let it run (``resume``: on from the step it stopped at) to its next step or its
        end."""
        assert self.task is not None
        if self.task.done():
            return
        if resume:
            self.arrived.clear()
            self.go.set()
        arrived = asyncio.ensure_future(self.arrived.wait())
        try:
            await asyncio.wait([arrived, self.task], timeout=STEP_TIMEOUT,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            arrived.cancel()
        if not self.task.done() and not self.arrived.is_set():
            raise Violation(f"{self.label()} neither reached a step nor ended within "
                            f"{STEP_TIMEOUT}s (after {self.points[-1:]})")


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    half = len(data) // 2
    yield data[:half]
    yield data[half:]


# -- the model ---------------------------------------------------------------------------


@dataclass
class Known:
    """A document as its clients know it from acknowledged answers."""

    id: str
    name: str
    version: int
    sha256: str
    deleted: bool = False
    acked: dict[int, str] = field(default_factory=dict)  # version -> SHA-256


@dataclass
class Stats:
    """What the explorer ran (for ``scripts/explore``)."""

    examples: int = 0
    steps: int = 0
    interleavings: set[tuple[tuple[str, str], ...]] = field(default_factory=set)


STATS = Stats()


class Explorer(RuleBasedStateMachine):
    """Operations suspended at any protocol step, interleaved with the resolvers."""

    backend: Backend
    loop: asyncio.AbstractEventLoop

    ops = Bundle("ops")

    def __init__(self) -> None:
        super().__init__()
        self.settings = Settings(**SETTINGS)
        self.ledger = self._run(self.backend.fresh(self.settings))
        self._run(self.ledger.connect())
        self.offset = 0.0
        self.ops_run: list[Op] = []
        self.known: dict[str, Known] = {}
        self.first_answer: dict[str, tuple[str, int, str]] = {}  # key -> (id, version, sha)
        self.trace: list[tuple[str, ...]] = []
        self.signature: list[tuple[str, str]] = []  # (operation, step) and resolver runs
        self.broken = False
        self.groups = itertools.count(1)
        failpoints.set_hook(_suspend_here)
        STATS.examples += 1

    # -- plumbing ----------------------------------------------------------------------
    def _run(self, coro: Awaitable[T]) -> T:
        try:
            return self.loop.run_until_complete(coro)
        except BaseException:
            self.broken = True
            raise

    def _fail(self, message: str) -> None:
        self.broken = True
        recent = "\n".join(f"  {' '.join(e)}" for e in self.trace[-30:])
        raise Violation(f"{message}\nlast events:\n{recent}")

    def _event(self, *what: str) -> None:
        self.trace.append(what)
        with contextlib.suppress(InvalidArgument):  # outside hypothesis (a replayed script)
            note("# " + " ".join(what))

    def _live(self) -> list[Op]:
        return [op for op in self.ops_run if not op.done]

    def _op(self, kind: str, **fields: Any) -> Op:
        op = Op(len(self.ops_run) + 1, kind, **fields)
        self.ops_run.append(op)
        return op

    async def _start(self, op: Op) -> None:
        async def body() -> Document | None:
            _CURRENT.set(op)
            if op.kind in ("create", "retry"):
                assert op.name is not None
                return await self.ledger.create(op.name, _chunks(op.data),
                                                idempotency_key=op.key)
            if op.kind == "sweeper":
                # one worker, so the run stops at one step at a time
                await Sweeper(self.ledger, parallel=1).run_once()
                return None
            assert op.doc_id is not None and op.expected is not None
            if op.kind == "replace":
                return await self.ledger.replace(op.doc_id, _chunks(op.data),
                                                  expected_version=op.expected)
            await self.ledger.delete(op.doc_id, expected_version=op.expected)
            return None

        op.task = asyncio.create_task(body())
        await self._until_step(op, starting=True)

    async def _until_step(self, op: Op, *, starting: bool = False) -> None:
        await op.advance(resume=not starting)
        if op.done:
            await self._answered(op)
        else:
            assert op.point is not None, f"{op.label()} is neither stopped nor done"
            self._event(f"op{op.n}", op.kind, "@", op.point)
            self.signature.append((op.kind, op.point))

    def run_to(self, op: Op, point: str) -> None:
        """Step ``op`` until it stops at ``point`` (for scripted interleavings)."""
        while op.point != point:
            if op.done:
                self._fail(f"{op.label()} ended before it reached {point}")
            self.step(op)
            self.consistent()

    async def _finish(self, op: Op) -> None:
        while not op.done:
            await self._until_step(op)

    async def _answered(self, op: Op) -> None:
        """Check the answer the client got and record it in the model."""
        assert op.task is not None
        exc = op.task.exception()
        if exc is not None:
            self._event(f"op{op.n}", op.kind, "failed:", type(exc).__name__)
            if op.kind == "sweeper" and not isinstance(exc, SweeperBusy):
                self._fail(f"{op.label()} failed: {type(exc).__name__}: {exc}")
            if not isinstance(exc, BlobLedgerError) or isinstance(exc, UNCLEAR):
                self._fail(f"{op.label()} failed with an unclear error "
                           f"{type(exc).__name__}: {exc}")
            if op.first is not None and op.sha256 == op.first[2]:
                self._fail(f"{op.label()} failed ({type(exc).__name__}: {exc}), but its key "
                           f"had answered {op.first} for these bytes before it started")
            if op.first is not None and not isinstance(exc, IdempotencyConflict):
                self._fail(f"{op.label()} failed with {type(exc).__name__}: {exc}, not an "
                           f"idempotency conflict, though its key had answered {op.first} "
                           "for other bytes")
            return
        doc = op.task.result()
        if op.kind == "sweeper":
            self._event(f"op{op.n}", "sweeper", "finished")
            return
        if op.kind == "delete":
            self._event(f"op{op.n}", "delete", "acknowledged")
            assert op.doc_id is not None
            self.known[op.doc_id].deleted = True
            return
        assert doc is not None
        self._event(f"op{op.n}", op.kind, "acknowledged", f"v{doc.version}")
        if doc.sha256 != op.sha256:
            self._fail(f"{op.label()} answered SHA-256 {doc.sha256}, not that of its bytes")
        if op.kind == "replace":
            assert op.doc_id is not None and op.expected is not None
            if doc.id != op.doc_id or doc.version != op.expected + 1:
                self._fail(f"{op.label()} answered {doc.id} v{doc.version}")
            self._acknowledge(doc)
            return
        assert op.name is not None
        if doc.name != op.name or doc.version != 1:
            self._fail(f"{op.label()} answered {doc.name!r} v{doc.version}")
        if op.key is not None:
            answer = (doc.id, doc.version, op.sha256)
            first = self.first_answer.setdefault(op.key, answer)
            if answer != first:
                self._fail(f"{op.label()} answered {answer}, but the first answer under "
                           f"its key was {first}")
        if doc.id not in self.known:
            self.known[doc.id] = Known(doc.id, doc.name, 1, op.sha256, acked={1: op.sha256})

    def _acknowledge(self, doc: Document) -> None:
        known = self.known[doc.id]
        assert doc.sha256 is not None
        if doc.version in known.acked:
            self._fail(f"version {doc.version} of {doc.id} acknowledged twice")
        known.acked[doc.version] = doc.sha256
        if doc.version > known.version:
            known.version, known.sha256 = doc.version, doc.sha256

    # -- the model check ---------------------------------------------------------------
    async def _check_model(self) -> None:
        visible = {doc.id: doc async for doc in self.ledger.list()}
        live = self._live()
        for doc_id, known in self.known.items():
            doc = visible.pop(doc_id, None)
            deleting = [op for op in live if op.kind == "delete" and op.doc_id == doc_id]
            if known.deleted:
                if doc is not None:
                    self._fail(f"{doc_id} is visible (v{doc.version}) after its "
                               "acknowledged delete")
                continue
            if doc is None:
                if not deleting:
                    self._fail(f"{doc_id} v{known.version} vanished, and no delete of it "
                               "was acknowledged or is running")
                continue
            if (doc.version, doc.sha256) == (known.version, known.sha256):
                continue
            running = [op for op in live if op.kind == "replace" and op.doc_id == doc_id
                       and op.expected is not None and op.expected + 1 == doc.version
                       and op.sha256 == doc.sha256]
            if doc.version < known.version or not running:
                self._fail(f"{doc_id} shows v{doc.version} ({doc.sha256}); acknowledged: "
                           f"v{known.version} ({known.sha256}); no running replace explains it")
        for doc_id, doc in visible.items():  # never acknowledged
            makers = [op for op in self.ops_run if op.kind in ("create", "retry")
                      and op.sha256 == doc.sha256 and op.name == doc.name]
            if not makers:
                self._fail(f"{doc_id} ({doc.name!r}) is visible, but no client created it")
            if all(op.done for op in makers):
                self._fail(f"{doc_id} ({doc.name!r}) is visible, but every create of it "
                           "failed: " + ", ".join(op.label() for op in makers))
        for doc in [d async for d in self.ledger.list()]:
            data = b"".join([chunk async for chunk in self.ledger.read(doc.id)])
            if hashlib.sha256(data).hexdigest() != doc.sha256:
                self._fail(f"{doc.id} v{doc.version} reads back other bytes")

    async def _check(self, *, settled: bool = False) -> None:
        report = await check(self.ledger, settled=settled)
        if not report.ok:
            self._fail(report.render())
        await self._check_model()

    # -- rules -------------------------------------------------------------------------
    @initialize()
    def clean_start(self) -> None:
        self._run(self._check())

    @rule(target=ops, name=st.sampled_from(NAMES), keyed=st.booleans())
    def start_create(self, name: str, keyed: bool) -> Op:
        group = next(self.groups)
        op = self._op("create", name=name, group=group,
                      key=f"key-{group}" if keyed else None,
                      data=f"create {group} of {name} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, original=ops)
    def start_retry(self, original: Op) -> Any:
        """Retry an earlier keyed create (or retry) with its key, name and bytes (else no
        step)."""
        if original.kind not in ("create", "retry") or original.key is None:
            return multiple()
        op = self._op("retry", name=original.name, key=original.key, data=original.data,
                      group=original.group, other_bytes=original.other_bytes,
                      first=self.first_answer.get(original.key))
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, original=ops)
    def start_retry_with_other_bytes(self, original: Op) -> Any:
        """Reuse an earlier create's key and name with other bytes: once the key has
        answered, a conflict; before, it may stand for a create of its own."""
        if original.kind not in ("create", "retry") or original.key is None:
            return multiple()
        group = next(self.groups)
        op = self._op("retry", name=original.name, key=original.key, group=group,
                      data=f"other bytes {group} ".encode() * 20, other_bytes=True,
                      first=self.first_answer.get(original.key))
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    def _target(self, pick: int, base: str) -> tuple[str, int] | None:
        alive = sorted(k for k, known in self.known.items() if not known.deleted)
        if not alive:
            return None
        known = self.known[alive[pick % len(alive)]]
        if base == "visible":
            seen = self._run(_visible(self.ledger, known.id))
            return known.id, seen if seen is not None else known.version
        if base == "stale" and known.version > 1:
            return known.id, known.version - 1
        return known.id, known.version

    @rule(target=ops, pick=st.integers(0, 3),
          version=st.sampled_from(["acknowledged", "visible", "stale"]))
    def start_replace(self, pick: int, version: str) -> Any:
        """Replace a document the client knows, expecting the version it last saw."""
        chosen = self._target(pick, version)
        if chosen is None:
            return multiple()
        n = len(self.ops_run) + 1
        op = self._op("replace", doc_id=chosen[0], expected=chosen[1],
                      data=f"replace {n} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, pick=st.integers(0, 3),
          version=st.sampled_from(["acknowledged", "visible", "stale"]))
    def start_delete(self, pick: int, version: str) -> Any:
        chosen = self._target(pick, version)
        if chosen is None:
            return multiple()
        op = self._op("delete", doc_id=chosen[0], expected=chosen[1])
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(op=ops)
    def step(self, op: Op) -> None:
        """Resume a suspended operation until its next step (or its end)."""
        if not op.done:
            self._run(self._until_step(op))

    @rule(op=ops)
    def finish(self, op: Op) -> None:
        """Resume a suspended operation until it ends."""
        if not op.done:
            self._run(self._finish(op))

    @rule(target=ops)
    def start_sweeper(self) -> Op:
        """A sweeper run that stops at each of its steps too (a paused sweeper)."""
        op = self._op("sweeper")
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule()
    def sweep(self) -> None:
        """One sweeper run to its end: stale intents, then the deletion path. On SQLite one
        sweeper runs at a time: busy while a paused one holds the lock."""
        self.signature.append(("sweep", ""))
        report = self._run(self._sweep_once())
        if report is None:
            self._event("sweep", "busy: a paused sweeper holds the SQLite lock")
            return
        self._event("sweep", *[f"{k}={v}" for k, v in report.as_dict().items()
                               if isinstance(v, int) and v and k not in ("batches",)])

    async def _sweep_once(self) -> SweepReport | None:
        try:
            return await Sweeper(self.ledger).run_once()
        except SweeperBusy:
            return None

    @rule()
    def reconcile_fix(self) -> None:
        report = self._run(reconcile(self.ledger, fix=True,
                                     older_than=self.settings.upload_deadline))
        self.signature.append(("reconcile", ""))
        self._event("reconcile --fix", *[f"{k}={report.count(k)}" for k in
                                         ("orphan", "missing", "missing_ready", "mismatch",
                                          "uncommitted") if report.count(k)],
                    f"fixed={report.fixed}")

    @precondition(lambda self: self.offset < MAX_OFFSET)
    @rule(seconds=st.sampled_from(JUMPS))
    def jump_clock(self, seconds: float) -> None:
        self.signature.append(("clock", f"+{seconds:g}"))
        self._move_clock(seconds)

    def _move_clock(self, seconds: float) -> None:
        self.offset += seconds
        set_clock_offset(self.ledger, self.offset)
        self._event("clock", f"+{seconds:g}s")

    @rule()
    def settle(self) -> None:
        """Every operation to its end, the clock past every cutoff, the resolvers until they
        find nothing; then the settled invariants (I4 too) and the model."""
        self.signature.append(("settle", ""))
        self._run(self._settle())

    async def _settle(self) -> None:
        for op in self._live():
            await self._finish(op)
        self._move_clock(SETTLE_JUMP)
        for _ in range(4):
            report = await Sweeper(self.ledger).run_once()
            self._event("sweep", f"swept={report.swept}", f"deleted={report.deleted}",
                        f"rolled_forward={report.rolled_forward}")
            self._move_clock(self.settings.delete_grace + 1)
            if not (report.swept or report.deleted or report.rolled_forward
                    or report.moved_to_deleting or report.absent):
                break
        await reconcile(self.ledger, fix=True, older_than=self.settings.upload_deadline)
        await self._check(settled=True)

    @invariant()
    def consistent(self) -> None:
        if not self.broken:
            STATS.steps += 1
            self._run(self._check())

    def teardown(self) -> None:
        try:
            if not self.broken:
                self.settle()
                STATS.interleavings.add(tuple(self.signature))
        finally:
            failpoints.set_hook(None)
            self.loop.run_until_complete(self._close())

    async def _close(self) -> None:
        for op in self._live():
            if op.task is not None:
                op.task.cancel()
                op.go.set()
        await asyncio.gather(*[op.task for op in self.ops_run if op.task is not None],
                             return_exceptions=True)
        await self.ledger.close()


async def _visible(ledger: Ledger, doc_id: str) -> int | None:
    async for doc in ledger.list():
        if doc.id == doc_id:
            return doc.version
    return None


# -- running it --------------------------------------------------------------------------


def explore(backend: Backend, *, seconds: float, batch: int = 20, steps: int = 30,
            shrink_seconds: int = 60, on_batch: Callable[[], None] | None = None) -> Stats:
    """Run the explorer on ``backend`` in batches of ``batch`` examples (``steps`` steps at
    most each) until ``seconds`` have passed; a violation raises (hypothesis shrinks it, for
    ``shrink_seconds`` at most, and prints the steps first)."""
    # Hypothesis shrinks for up to five minutes; each attempt here replays a whole run of
    # database and storage calls, so a shorter bound keeps a failing suite short.
    engine.MAX_SHRINKING_SECONDS = shrink_seconds
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(backend.start())
        machine = type(f"Explore_{backend.name.replace('-', '_')}", (Explorer,),
                       {"backend": backend, "loop": loop})
        config = settings(max_examples=batch, stateful_step_count=steps, deadline=None,
                          database=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            run_state_machine_as_test(machine, settings=config)
            if on_batch is not None:
                on_batch()
        return STATS
    finally:
        loop.run_until_complete(backend.stop())
        loop.close()
