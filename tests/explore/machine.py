"""The interleaving explorer: a model-based state machine (hypothesis) over one in-process
ledger in which client operations run as asyncio tasks that stop at every protocol step
(the failpoints, through :func:`blobledger.failpoints.set_hook`) and are resumed later,
interleaved with sweeps (which include the deletion path and the owed retags), retag
worker runs, ``reconcile --fix`` and jumps of the clock; with the retag inline or deferred
(``explore(retag=...)``).

The writers: create (keyed or not, and retries under the key), a held create (processed by
processing runs, which stop at their steps too), replace, delete; direct
uploads (begin, the client's put to the store's URL or to ``serve``, completions, two of
them at once, cancel); tus uploads (create, PATCHes whose last one completes, a HEAD as from
another instance, termination); staging (``Ledger.stage``, and attachment uploads), A4 in an
application's transaction through the sqlalchemy integration, and detach; variants of the
documents named ``a`` (PNG images; ``make_variant``, which waits for no other maker here).
The event delivery workers (the real :class:`~blobledger.workers.delivery.Delivery`, one
event per claim) run among the operations too, stopping at ``events.after_claim``,
``events.before_log``, ``events.after_send`` and ``events.after_mark``, to an in-process
handler that a rule makes refuse or take the events (:mod:`tests.explore.delivery`); a
rule overtakes a worker paused between its claim and its mark (its lease lapsed, a second
worker claims, sends and is paused before its own mark, then the first marks).
Besides the
protocol's failpoints an operation stops inside the stores' calls that read before they
write (``store.*`` failpoints: S3's tag rewrites and its ETag-only delete, Azurite's retag
that compares first) and before the ledger's tag reads and checksum reads
(:class:`PausingStore`), so each backend's real guard semantics is what is exercised.

After every step the events agree with the changes (exactly one per committed change, in
order per document, none without its change: :meth:`Explorer._check_events`), and the
invariants I1, I3 and I5 hold (:func:`blobledger.workers.invariants.check`; I4
at a settle step, once every operation has finished, every live upload's client finished
it, and the clock is past every cutoff: first with the sweeper alone, then after
``reconcile --fix``), and every answer a client got agrees with a simple model:

- an acknowledged create or replace is readable with its bytes until an acknowledged later
  change of that document; an acknowledged delete is gone;
- a failed operation changed nothing visible, and it failed with a clear error (a
  ``BlobLedgerError``, never a storage error);
- a retry under an idempotency key returns the first response under that key (id, version,
  SHA-256);
- an upload's completions all answer the one document (or staged blob) it made, with the
  client's bytes; an honest client's upload is never given up, and is lost only once the
  client cancelled it or it expired; a content PUT answered 201 still has its intent;
- a blob acknowledged as staged can be attached unless a sweep ran past its age, and an
  attached blob is readable with its bytes until it is detached;
- a held document is never visible to a reader (I5: not through ``get``, not listed) until
  a processing run accepted it; then it is a ready document like another; at a settle none
  is left held.
- delivery (:class:`tests.explore.delivery.DeliveryModel`): the handler never gets an event
  before an earlier event of its subject was taken; no two live claims (lease running, not
  yet marked by their worker) hold one event; a mark lands only for the event's latest claim;
  no event is dead while a live claim delivered it; no event counts more attempts than claims
  of it that reached their mark; settled (the handler healthy, past every lease and backoff),
  every event is delivered, or dead after the maximum of refusals (its subject's later ones
  held back behind it).
- a variant answered is its document's, reads back its bytes, and at most one variant is
  attached per version and variant; no attached variant outlives its version (the
  invariants: its version must exist, its bytes must be there) and, settled, no variant blob
  or row is left beyond the grace.

What is visible while an operation is suspended may be that operation's own effect (a
replace suspended after R4 already shows its version); the model allows exactly the effects
of the operations still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import io
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
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
from PIL import Image
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker

from blobledger import failpoints
from blobledger.config import Settings
from blobledger.errors import (
    AttachLost,
    BlobLedgerError,
    BlobNotFound,
    IdempotencyConflict,
    IntegrityError,
    IntentLost,
    NameTaken,
    NotFound,
    OffsetMismatch,
    StoreError,
    StoreUnavailable,
    SweeperBusy,
    UploadGone,
)
from blobledger.protocol.attachments import StagedBlob, StagedUpload
from blobledger.protocol.documents import Document
from blobledger.protocol.events import events
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import (
    PENDING_TAG,
    STATE_TAG,
    BlobRow,
    DocumentRow,
    UploadState,
)
from blobledger.sqlalchemy import CLOCK_OFFSET
from blobledger.stores.base import DirectPut
from blobledger.uploads.direct import DirectUploads
from blobledger.uploads.resumable import Resumable
from blobledger.variants import ImageRefused, VariantBusy, make_variant
from blobledger.workers.invariants import check
from blobledger.workers.processing import ProcessingWorker
from blobledger.workers.reconciler import reconcile
from blobledger.workers.retagger import Retagger
from blobledger.workers.sweeper import SWEEP_LEASE, Sweeper, SweepReport
from tests.explore.backends import Backend, OwnerRow
from tests.explore.delivery import DeliveryModel, deliver_all
from tests.explore.s3writers import S3Endpoint, visible
from tests.support.clock import set_clock_offset

T = TypeVar("T")
#: uploads that outlive a request expire before they can be swept (a loss before expiry is a
#: violation, never a sweep)
SETTINGS: dict[str, Any] = {"upload_deadline": 60.0, "sweep_after": 180.0, "delete_grace": 30.0,
            "direct_upload_expiry": 120.0, "resumable_expiry": 120.0,
            "processors": ("content-type",), "variant_lease": 60.0,
            # every jump (31 s at least) lapses a delivery claim; the backoff after the last
            # failure (10 s) too; dead after three refusals
            "event_lease": 30.0, "event_backoff": 5.0, "event_max_attempts": 3}
#: the variant the documents named ``a`` (images) are asked for
VARIANTS = "thumb=8x8"
EXPIRY: float = SETTINGS["direct_upload_expiry"]
#: where a delivery worker holds a claim it has not yet marked
MID_DELIVERY = ("events.after_claim", "events.before_log", "events.after_send")
#: steps the overtaking delivery worker takes at most to reach the overtaken one's event
OVERTAKE_STEPS = 24
#: clock jumps: past the grace, past the upload deadline, past sweep_after, an hour
JUMPS = (31.0, 61.0, 181.0, 3600.0)
#: jumps stop here, well inside the retention of idempotency keys (24 h)
MAX_OFFSET = 12 * 3600.0
#: a settle moves the clock this far: past sweep_after, the grace and a sweeper's lease
SETTLE_JUMP = SETTINGS["sweep_after"] + SETTINGS["delete_grace"] + SWEEP_LEASE + 1
NAMES = ("a", "b")
#: the names of held creations (their bytes declare no type: the check accepts them)
HELD_NAMES = ("h",)
#: documents of this name are PNG images (their variants are asked for)
IMAGE_NAME = "a"
AZURE_API_VERSION = "2021-12-02"  # a client's put to a SAS URL names the API it speaks
#: the longest an operation may take to reach its next step (or its end)
STEP_TIMEOUT = 30.0
#: errors that must never reach a client of a paused or interleaved operation
UNCLEAR = (StoreError, StoreUnavailable)


class Violation(AssertionError):
    """The ledger broke an invariant or gave an answer the model cannot explain."""


# -- operations --------------------------------------------------------------------------

_CURRENT: contextvars.ContextVar[Op | None] = contextvars.ContextVar("op", default=None)


async def _suspend_here(point: str) -> None:
    """The failpoint hook: the operation running in this task (if any) stops at ``point``.
    A task of its own that an operation started (a store's concurrent deletes) passes while
    another of its tasks is stopped: an operation stops at one step at a time."""
    op = _CURRENT.get()
    if op is not None and op.point is None:
        await op.suspend(point)


#: every kind of client operation; which of them make or use an upload
WRITERS = ("create", "retry", "replace", "delete", "stage", "variant")
UPLOAD_KINDS = ("direct_begin", "direct_put", "direct_complete", "direct_cancel",
                "tus_create", "tus_patch", "tus_head", "tus_terminate")
KINDS = (*WRITERS, *UPLOAD_KINDS, "sweeper", "held", "processing", "retagger", "delivery")
#: the workers among them: they must simply finish
WORKERS = ("sweeper", "retagger", "processing", "delivery")
#: the workers that may claim stale rows (a loss after one ran past a row's age is a sweep's)
RESOLVERS = ("sweeper", "retagger", "processing")
#: the completions of an upload: each may answer its document or staged blob
COMPLETIONS = ("direct_complete", "tus_patch", "tus_head")


@dataclass(eq=False)
class Upload:
    """A client's direct or tus upload as the client knows it from its answers."""

    n: int
    mode: str  # direct | tus
    name: str | None  # a document's; None: it stages an attachment
    data: bytes
    began_at: float  # the clock offset when its creation started
    parts: list[bytes] = field(default_factory=list)  # tus: the bodies it sends, in order
    id: str | None = None  # once its creation answered
    doc_id: str | None = None  # the document it makes (a document's upload)
    blob: str | None = None  # the blob name its intent holds, once its creation answered
    token: str | None = None  # direct, to ``serve``: the upload's token
    target: DirectPut | None = None  # direct: the store's own URL
    offset: int = 0  # tus: the offset the client was last told
    put_acked: bool = False  # direct: the bytes' put answered 201
    cancelled: bool = False  # a cancel or termination was sent
    answer: str | None = None  # the document id or blob name a completion answered

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def attachment(self) -> bool:
        return self.name is None

    def label(self) -> str:
        what = f"{self.name!r}" if self.name is not None else "attachment"
        return f"{self.mode} upload u{self.n} ({what}, {len(self.data)} bytes)"


@dataclass(eq=False)
class Staged:
    """A blob acknowledged as staged (``Ledger.stage``, or an attachment upload's
    completion), and what the application did with it."""

    name: str
    sha256: str
    began_at: float  # the clock offset when its A1 started (its row's age counts from then)
    blob: StagedBlob | None = None  # Ledger.stage's answer (A4 needs its token)
    upload_id: str | None = None  # an upload's: A4 asks Ledger.staged_upload
    owner: int | None = None  # the owner row that holds it, once attached
    detached: bool = False
    lost: bool = False  # could not be attached (allowed only after a sweep past its age)


@dataclass(eq=False)
class Op:
    """One client operation, run as a task that stops at every failpoint it reaches."""

    n: int
    kind: str  # one of KINDS
    doc_id: str | None = None  # replace, delete
    name: str | None = None  # create, retry
    expected: int | None = None  # replace, delete
    key: str | None = None  # create (keyed), retry
    data: bytes = b""
    group: int = 0  # creations sharing a key (and bytes) share a group
    #: a retry: the first answer under its key when it started (it must get that again)
    first: tuple[str, int, str] | None = None
    other_bytes: bool = False  # a retry under the key with bytes of its own (or its retry)
    upload: Upload | None = None  # an upload's operations
    #: a create, replace or delete sent to the S3 endpoint (``s3writers``), not the ledger
    s3: bool = False
    create_only: bool = False  # an S3 create: ``If-None-Match: *``
    #: an S3 create made as a multipart upload (created, its part uploaded, completed)
    multipart: bool = False
    began_at: float = 0.0  # the clock offset when it started
    task: asyncio.Task[Any] | None = None
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
        if self.upload is not None:
            return f"op{self.n} {self.kind} of {self.upload.label()}"
        what = {"create": f"create({self.name!r}{', keyed' if self.key else ''})",
                "retry": f"retry({self.name!r}, key {self.key}"
                         + (", other bytes)" if self.other_bytes else ")"),
                "replace": f"replace({self.doc_id}, v{self.expected})",
                "delete": f"delete({self.doc_id}, v{self.expected})",
                "stage": "stage()",
                "held": f"create({self.name!r}, held)",
                "processing": "processing run",
                "variant": f"variant({self.doc_id}, thumb)",
                "sweeper": "sweeper run", "retagger": "retag worker run",
                "delivery": "delivery worker run"}[self.kind]
        if self.s3:
            what += (" via S3" + (" multipart" if self.multipart else "")
                     + (", If-None-Match: *" if self.create_only else ""))
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


async def _one(data: bytes) -> AsyncIterator[bytes]:
    if data:
        yield data


def _part_at(parts: list[bytes], offset: int) -> bytes:
    """The part of a tus upload that starts at ``offset`` (nothing at its end)."""
    start = 0
    for part in parts:
        if start == offset:
            return part
        start += len(part)
    return b""


class PausingStore:
    """The ledger's store, with a step before each call that reads what a later call of the
    same operation acts on (``store.before_get_tags``, ``store.before_digest_stored``): a
    completion can then stop between reading an upload's row and reading its blob's tags.
    Every other attribute is the store's own; calls inside the store are not stepped."""

    STEPPED = ("get_tags", "digest_stored")

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name not in self.STEPPED:
            return value

        async def stepped(*args: Any, **kwargs: Any) -> Any:
            await failpoints.hit(f"store.before_{name}")
            return await value(*args, **kwargs)

        return stepped


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
    held: bool = False  # acknowledged held, not yet seen accepted


@dataclass
class Stats:
    """What the explorer ran (for ``scripts/explore``)."""

    examples: int = 0
    steps: int = 0
    interleavings: set[tuple[tuple[str, str], ...]] = field(default_factory=set)
    #: the S3 endpoint's writers' answers: (operation, answer) -> how many
    s3: Counter[tuple[str, str]] = field(default_factory=Counter)


STATS = Stats()


class Explorer(RuleBasedStateMachine):
    """Operations suspended at any protocol step, interleaved with the resolvers."""

    backend: Backend
    loop: asyncio.AbstractEventLoop
    retag: str = "inline"  # BLOBLEDGER_RETAG
    #: documents are written only through the S3 endpoint (``scripts/explore --s3``)
    s3_only: bool = False

    ops = Bundle("ops")

    def __init__(self) -> None:
        super().__init__()
        self.settings = Settings(**SETTINGS, variants=VARIANTS, retag=self.retag)
        self.ledger = self._run(self.backend.fresh(self.settings))
        self._run(self.ledger.connect())
        self.ledger.store = PausingStore(self.ledger.store)  # type: ignore[assignment]
        self.offset = 0.0
        self.ops_run: list[Op] = []
        self.known: dict[str, Known] = {}
        self.first_answer: dict[str, tuple[str, int, str]] = {}  # key -> (id, version, sha)
        self.trace: list[tuple[str, ...]] = []
        self.signature: list[tuple[str, str]] = []  # (operation, step) and resolver runs
        self.broken = False
        self.groups = itertools.count(1)
        self.uploads: list[Upload] = []
        self.staged: list[Staged] = []
        self.sweeps: list[float] = []  # the clock offsets at which sweepers claimed work
        self.owners = itertools.count(1)
        self.direct = DirectUploads(self.ledger)
        self.resumable = Resumable(self.ledger)
        self.sessions = async_sessionmaker(self.ledger.db.engine, expire_on_commit=False)
        self.http = httpx.AsyncClient(timeout=STEP_TIMEOUT)
        self._s3: S3Endpoint | None = None  # made on the first S3 writer
        self.deliveries = DeliveryModel(self.settings.event_lease,
                                        self.settings.event_max_attempts)
        self.deliveries.register(self.ledger)
        self.deliveries.install()
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
        op = Op(len(self.ops_run) + 1, kind, began_at=self.offset, **fields)
        self.ops_run.append(op)
        return op

    async def _start(self, op: Op) -> None:
        async def body() -> Any:
            _CURRENT.set(op)
            if op.upload is not None:
                return await self._upload_step(op, op.upload)
            if op.s3:
                assert op.name is not None
                if op.kind == "delete":
                    return await self.s3.delete(op.name)
                if op.multipart:  # each request in turn, in the one task
                    upload_id = await self.s3.create_upload(op.name)
                    tag = await self.s3.upload_part(op.name, upload_id, 1, op.data)
                    return await self.s3.complete(op.name, upload_id, [(1, tag)],
                                                  create_only=op.create_only)
                return await self.s3.put(op.name, op.data, create_only=op.create_only)
            if op.kind == "stage":
                return await self.ledger.stage(_chunks(op.data), filename="staged.bin")
            if op.kind in ("create", "retry", "held"):
                assert op.name is not None
                return await self.ledger.create(
                    op.name, _chunks(op.data), idempotency_key=op.key,
                    content_type="image/png" if op.name == IMAGE_NAME else None,
                    hold=op.kind == "held")
            if op.kind == "processing":
                await ProcessingWorker(self.ledger, batch=1).run_once()
                return None
            if op.kind == "variant":
                assert op.doc_id is not None
                return await make_variant(self.ledger, op.doc_id, "thumb", wait=0.0)
            if op.kind == "sweeper":
                # one worker, so the run stops at one step at a time
                await Sweeper(self.ledger, parallel=1).run_once()
                return None
            if op.kind == "retagger":  # outside the SQLite sweep lock, as in ``serve``
                await Retagger(self.ledger).run_once()
                return None
            if op.kind == "delivery":
                await self.deliveries.run(self.ledger, f"op{op.n}")
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
        if op.kind in RESOLVERS:
            self.sweeps.append(self.offset)  # it may claim on this clock
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

    def reach(self, op: Op, point: str) -> bool:
        """Step ``op`` until it stops at ``point`` (False if it ended first: a step this
        backend does not have)."""
        while op.point != point:
            if op.done:
                self._event(f"op{op.n}", "ended before", point)
                return False
            self.step(op)
            self.consistent()
        return True

    async def _finish(self, op: Op) -> None:
        while not op.done:
            await self._until_step(op)

    async def _answered(self, op: Op) -> None:
        """Check the answer the client got and record it in the model."""
        assert op.task is not None
        exc = op.task.exception()
        if op.s3:
            what = (f"{op.kind}{' (multipart)' if op.multipart else ''}"
                    f"{' (If-None-Match: *)' if op.create_only else ''}")
            STATS.s3[what, "acknowledged" if exc is None else
                     f"`{getattr(exc, 'code', type(exc).__name__)}`"] += 1
        if op.upload is not None:
            await self._upload_answered(op, op.upload, exc)
            return
        if op.kind == "stage":
            self._staged_answered(op, exc)
            return
        if op.kind == "variant":
            await self._variant_answered(op, exc)
            return
        if exc is not None:
            self._event(f"op{op.n}", op.kind, "failed:", type(exc).__name__)
            if op.kind in WORKERS and not isinstance(exc, SweeperBusy):
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
        if op.kind in WORKERS:
            self._event(f"op{op.n}", op.kind, "finished")
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
        if doc.status != "ready" and (op.kind != "held" or doc.status != "held"):
            self._fail(f"{op.label()} answered a document {doc.status}")
        if doc.id not in self.known:
            self.known[doc.id] = Known(doc.id, doc.name, 1, op.sha256, acked={1: op.sha256},
                                       held=doc.status == "held")

    # -- uploads that outlive a request, and staged blobs ---------------------------------
    async def _upload_step(self, op: Op, up: Upload) -> Any:
        """What the client's request (or ``serve``'s handler of it) does for this step."""
        if op.kind == "direct_begin":
            return await self.direct.begin(up.name, len(up.data), "text/plain",
                                           attachment=up.attachment)
        if op.kind == "tus_create":
            meta = {"name": up.name} if up.name is not None else {"attachment": "true"}
            return await self.resumable.create(len(up.data), meta)
        assert up.id is not None
        if op.kind == "direct_put":
            if up.target is not None:
                return await self._client_put(up.target, up.data)
            assert up.token is not None
            await self.direct.receive(up.id, up.token, _chunks(up.data))
            return 201
        if op.kind == "direct_complete":
            return await self.direct.complete(up.id)
        if op.kind == "direct_cancel":
            return await self.direct.cancel(up.id)
        if op.kind == "tus_terminate":
            return await self.resumable.terminate(await self.resumable.find(up.id))
        if op.kind == "tus_head":  # as the route: a complete upload is completed here
            upload = await self.resumable.find(up.id)
            if upload.state == UploadState.OPEN and upload.offset == upload.length:
                return upload.offset, await self.resumable.complete(upload)
            if upload.state == UploadState.DONE:
                return upload.offset, await self.resumable.document(upload)
            return upload.offset, None
        # tus_patch, as the route: the part at the offset the client knows; the last completes.
        # Each PATCH as on an instance of its own: requests to one upload take turns within a
        # process (a paused one would hold the next), so the fence explored is the offset's
        # compare-and-set between instances.
        upload = await self.resumable.find(up.id)
        body = _part_at(up.parts, up.offset)
        offset = await Resumable(self.ledger).append(upload, up.offset, _one(body), len(body))
        made = None
        if offset == upload.length and upload.state == UploadState.OPEN:
            fresh = await self.resumable.find(up.id)
            made = (await self.resumable.complete(fresh) if fresh.state == UploadState.OPEN
                    else await self.resumable.document(fresh))
        return offset, made

    async def _client_put(self, target: DirectPut, data: bytes) -> int:
        """The client's own PUT to the store's URL (a SAS, a presigned URL)."""
        headers = dict(target.headers)
        if "x-ms-blob-type" in headers:
            headers.setdefault("x-ms-version", AZURE_API_VERSION)
        response = await self.http.request(target.method, target.url, content=data,
                                           headers=headers)
        if response.status_code == 403 and "<Code>AuthorizationPermissionMismatch</Code>" \
                in response.text:
            # Azure's answer (Azurite's too) to a create-only SAS's write to a blob that
            # exists: the overwrite refused, what 409 says elsewhere (docs/backends.md); an
            # expired or forged SAS is AuthenticationFailed, still a 403
            return 409
        return response.status_code

    def _expired(self, up: Upload) -> bool:
        """Whether the upload may have been given up by the ledger (past its expiry, which
        comes before the sweep of its intent)."""
        return self.offset - up.began_at >= EXPIRY

    @staticmethod
    def _url_expired(up: Upload) -> bool:
        """Whether the store's own URL has expired on the storage's clock, which is the real
        one (the explorer moves only the ledger's): a slow machine gets there within a run.
        A few seconds' margin for the emulator's and this process's clocks."""
        return up.target is not None and \
            datetime.now(UTC) >= up.target.expires_at - timedelta(seconds=5)

    def _recreatable(self, up: Upload) -> bool:
        """Whether the store's own URL may create the upload's blob again: it stays valid
        on the storage's clock, which the explorer never moves, after the blob was deleted
        (the upload cancelled, or expired and swept, its blob then an orphan that
        ``reconcile --fix`` deletes). Never an overwrite: the name was free again."""
        return up.target is not None and (up.cancelled or self._expired(up))

    def _swept_since(self, began_at: float) -> bool:
        """Whether a sweeper claimed work on a clock past ``sweep_after`` from ``began_at``
        (only then may an intent started at ``began_at`` have been swept)."""
        return any(at >= began_at + self.settings.sweep_after for at in self.sweeps)

    def _answer_gone(self, up: Upload) -> bool:
        """Whether what the upload's completion answered is gone by its owner's doing (a
        deleted document, an attached blob) or by a legitimate sweep."""
        if up.answer is None:
            return False
        known = self.known.get(up.answer)
        if known is not None:  # deleted, or a delete of it is running (it may have applied)
            return known.deleted or any(op.kind == "delete" and op.doc_id == up.answer
                                        for op in self._live())
        staged = next((s for s in self.staged if s.name == up.answer), None)
        return staged is not None and (staged.owner is not None or staged.lost
                                       or self._swept_since(staged.began_at))

    async def _upload_answered(self, op: Op, up: Upload, exc: BaseException | None) -> None:
        assert op.task is not None
        if exc is not None:
            self._event(f"op{op.n}", op.kind, f"u{up.n}", "failed:", type(exc).__name__)
            await self._upload_failed(op, up, exc)
            return
        result = op.task.result()
        if op.kind in ("direct_begin", "tus_create"):
            record = result.upload if op.kind == "direct_begin" else result
            up.id, up.doc_id, up.blob = record.id, record.document_id or None, record.blob_name
            if op.kind == "direct_begin":
                up.token, up.target = result.token, result.target
            self._event(f"op{op.n}", op.kind, f"u{up.n}", "answered", record.id)
            return
        if op.kind == "direct_put":
            self._event(f"op{op.n}", "direct_put", f"u{up.n}", f"answered {result}")
            if result in (200, 201):
                if up.put_acked and not self._recreatable(up):
                    self._fail(f"{op.label()}: a second put of one upload answered {result}")
                up.put_acked = True
                if up.target is None:
                    await self._put_still_fenced(op, up)
            elif result == 403 and self._url_expired(up):
                self._event(f"op{op.n}", "direct_put", f"u{up.n}",
                            "refused: the URL expired on the storage's (real) clock")
            elif result not in (409, 412):
                self._fail(f"{op.label()}: the store answered {result} to the client's put")
            return
        if op.kind in ("direct_cancel", "tus_terminate"):
            self._event(f"op{op.n}", op.kind, f"u{up.n}", "acknowledged")
            if up.answer is not None and not self._answer_gone(up):
                self._fail(f"{op.label()} succeeded, but a completion had answered "
                           f"{up.answer}")
            return
        made = result
        if op.kind in ("tus_patch", "tus_head"):
            offset, made = result
            if op.kind == "tus_patch" and offset < up.offset:
                self._fail(f"{op.label()} answered offset {offset} after {up.offset}")
            up.offset = offset
        self._event(f"op{op.n}", op.kind, f"u{up.n}", "answered",
                    "nothing" if made is None else getattr(made, "id", "?"))
        if made is None:
            await self._unanswered(op, up)
            return
        self._completed(op, up, made)

    async def _put_still_fenced(self, op: Op, up: Upload) -> None:
        """``serve``'s content PUT answered 201: its intent must still be the upload's (a
        201 for an intent the sweeper removed leaves a pending blob nobody owns)."""
        assert up.id is not None
        record = await self.ledger.transitions.find_upload(up.id)
        if record is None or (record.state == UploadState.OPEN and \
                not await self.ledger.transitions.owns(record.intent("text/plain"))):
            self._fail(f"{op.label()} answered 201, but the upload's intent is gone "
                       "(removed by the sweeper while the bytes were put)")

    async def _unanswered(self, op: Op, up: Upload) -> None:
        """A HEAD that answered no document: only while the upload is not complete (a PATCH
        to a complete upload answers its offset alone, as tus has it)."""
        if op.kind != "tus_head" or up.offset != len(up.data):
            return
        if up.answer is not None and not self._answer_gone(up):
            self._fail(f"{op.label()} answered nothing, but an earlier completion answered "
                       f"{up.answer}")
        if up.doc_id is not None and await _visible(self.ledger, up.doc_id) is not None:
            self._fail(f"{op.label()} answered nothing for a complete upload whose document "
                       f"{up.doc_id} is ready")

    def _completed(self, op: Op, up: Upload, made: Any) -> None:
        """A completion answered a document or a staged blob: the upload's, every time."""
        if isinstance(made, Document):
            if up.attachment or made.id != up.doc_id or made.name != up.name \
                    or (made.version == 1 and made.sha256 != up.sha256):
                self._fail(f"{op.label()} answered {made.id} {made.name!r} v{made.version} "
                           f"({made.sha256})")
            known = self.known.get(made.id)
            if known is not None and known.deleted:
                self._fail(f"{op.label()} answered {made.id}, deleted by its owner")
            if up.answer is not None and up.answer != made.id:
                self._fail(f"{op.label()} answered {made.id}; before: {up.answer}")
            up.answer = made.id
            if known is None:
                self.known[made.id] = Known(made.id, made.name, made.version, up.sha256,
                                            acked={1: up.sha256})
            return
        assert isinstance(made, StagedUpload)
        if not up.attachment or made.sha256 != up.sha256 or made.upload_id != up.id:
            self._fail(f"{op.label()} answered the staged blob {made.name} ({made.sha256})")
        if up.answer is not None and up.answer != made.name:
            self._fail(f"{op.label()} answered {made.name}; before: {up.answer}")
        up.answer = made.name
        if not any(s.name == made.name for s in self.staged):
            self.staged.append(Staged(made.name, made.sha256, up.began_at,
                                      upload_id=up.id))

    async def _upload_failed(self, op: Op, up: Upload, exc: BaseException) -> None:
        """Which failures an honest client of a live upload may get: a race with its own
        other requests, or the loss of an upload it cancelled or let expire."""
        what = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, BlobLedgerError) or isinstance(exc, UNCLEAR):
            self._fail(f"{op.label()} failed with an unclear error {what}")
        if isinstance(exc, IntegrityError):
            self._fail(f"{op.label()} gave an honest client's upload up ({what})")
        if isinstance(exc, NameTaken) and op.kind in ("direct_begin", "tus_create"):
            return  # another document (or creation) holds the name
        lossy = up.cancelled or self._expired(up) or self._answer_gone(up)
        if isinstance(exc, OffsetMismatch):
            if op.kind != "direct_complete" or not up.put_acked or lossy:
                return  # racing requests, a repeated put, a completed or empty upload
            self._fail(f"{op.label()} found no bytes after the put was acknowledged ({what})")
        if not isinstance(exc, (UploadGone, IntentLost)):
            self._fail(f"{op.label()} failed with {what}")
        if isinstance(exc, IntentLost) and op.kind in COMPLETIONS and up.doc_id is not None \
                and await _visible(self.ledger, up.doc_id) is not None:
            self._fail(f"{op.label()} was told {what}, but its document {up.doc_id} is ready")
        if not lossy:
            self._fail(f"{op.label()} failed with {what}, though the upload neither expired "
                       "nor was cancelled" + (f" (it had answered {up.answer})"
                                               if up.answer else ""))

    def _staged_answered(self, op: Op, exc: BaseException | None) -> None:
        assert op.task is not None
        if exc is not None:
            self._event(f"op{op.n}", "stage", "failed:", type(exc).__name__)
            if not isinstance(exc, BlobLedgerError) or isinstance(exc, UNCLEAR):
                self._fail(f"{op.label()} failed with an unclear error "
                           f"{type(exc).__name__}: {exc}")
            if not isinstance(exc, IntentLost) or not self._swept_since(op.began_at):
                self._fail(f"{op.label()} failed ({type(exc).__name__}: {exc}) though no "
                           "sweep ran past its age")
            return
        blob = op.task.result()
        self._event(f"op{op.n}", "stage", "acknowledged", blob.name)
        if blob.sha256 != op.sha256:
            self._fail(f"{op.label()} answered SHA-256 {blob.sha256}, not that of its bytes")
        self.staged.append(Staged(blob.name, blob.sha256, op.began_at, blob=blob))

    async def _variant_answered(self, op: Op, exc: BaseException | None) -> None:
        """A variant's answer: a clear error (its document gone or no image any more, its
        version ended, another maker holding it), or a variant of that document whose blob
        reads back its bytes."""
        assert op.task is not None
        if exc is not None:
            self._event(f"op{op.n}", "variant", "failed:", type(exc).__name__)
            if not isinstance(exc, (NotFound, ImageRefused, VariantBusy)):
                self._fail(f"{op.label()} failed with an unexpected error "
                           f"{type(exc).__name__}: {exc}")
            return
        variant = op.task.result()
        self._event(f"op{op.n}", "variant", "answered", f"v{variant.version}", variant.blob)
        if variant.document_id != op.doc_id:
            self._fail(f"{op.label()} answered a variant of {variant.document_id}")
        try:
            reader = await self.ledger.store.open(variant.blob)
        except BlobNotFound:  # its version ended since and the grace passed: allowed
            if not await self._variant_ended(variant.blob):
                self._fail(f"{op.label()} answered {variant.blob}, which is not there")
            return
        try:
            data = b"".join([chunk async for chunk in reader])
        finally:
            await reader.aclose()
        if hashlib.sha256(data).hexdigest() != variant.sha256:
            self._fail(f"{op.label()} answered {variant.blob}, which reads back other bytes")

    async def _variant_ended(self, blob: str) -> bool:
        async with self.ledger.db.session(readonly=True) as session:
            row = await session.get(BlobRow, blob)
        return row is None or row.state == "deleting"

    async def _check_variants(self) -> None:
        """At most one variant attached per version and variant (made once)."""
        async with self.ledger.db.session(readonly=True) as session:
            twice = (await session.execute(
                select(BlobRow.owner_key, BlobRow.owner_column, func.count())
                .where(BlobRow.owner_column.startswith("variant:"),
                       BlobRow.state == "attached")
                .group_by(BlobRow.owner_key, BlobRow.owner_column)
                .having(func.count() > 1))).all()
        if twice:
            self._fail(f"variants attached more than once: {twice}")

    async def _attach(self, staged: Staged) -> None:
        """A4 in an application's transaction: a new owner row holding the staged blob."""
        owner = next(self.owners)
        try:
            blob = staged.blob
            if blob is None:
                assert staged.upload_id is not None
                blob = await self.ledger.staged_upload(staged.upload_id)
            async with self.sessions() as session, session.begin():
                session.info[CLOCK_OFFSET] = self.offset
                session.add(OwnerRow(id=owner, file=blob))
        except (AttachLost, UploadGone) as exc:
            self._event("attach", staged.name, "failed:", type(exc).__name__)
            if not self._swept_since(staged.began_at):
                self._fail(f"the staged blob {staged.name}, acknowledged as staged, could "
                           f"not be attached ({type(exc).__name__}: {exc}) though no sweep "
                           "ran past its age")
            staged.lost = True
            return
        self._event("attach", staged.name, f"to owner {owner}")
        staged.owner = owner

    async def _detach(self, staged: Staged, how: str) -> None:
        async with self.sessions() as session, session.begin():
            session.info[CLOCK_OFFSET] = self.offset
            row = await session.get(OwnerRow, staged.owner)
            assert row is not None
            if how == "clear":
                row.file = None
            else:
                await session.delete(row)
        self._event("detach", staged.name, how)
        staged.detached = True

    async def _check_attachments(self) -> None:
        for staged in self.staged:
            if staged.owner is None or staged.detached:
                continue
            try:
                data = b"".join([c async for c in self.ledger.read_attachment(staged.name)])
            except NotFound:
                self._fail(f"the attached blob {staged.name} is not readable")
            if hashlib.sha256(data).hexdigest() != staged.sha256:
                self._fail(f"the attached blob {staged.name} reads back other bytes")

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
            if known.held:
                state = await self.ledger.hold_state(doc_id)
                if state is not None and state.status != "held":
                    self._fail(f"{doc_id} was {state.status}: {state.reason}")
                if doc is not None:  # accepted (I5: a held document is never listed)
                    known.held = False
                elif state is not None or deleting:
                    continue  # still held; or accepted and being deleted
            if doc is None and known.held:
                self._fail(f"{doc_id} was acknowledged held, and is neither held nor "
                           "visible now")
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
            makers = [op for op in self.ops_run if op.kind in ("create", "retry", "held")
                      and op.sha256 == doc.sha256 and op.name == doc.name]
            uploads = [up for up in self.uploads if up.doc_id == doc_id
                       and up.name == doc.name and up.sha256 == doc.sha256]
            if uploads:
                continue  # its client may still ask for it (a completion, a HEAD)
            if not makers:
                self._fail(f"{doc_id} ({doc.name!r}) is visible, but no client created it")
            if all(op.done for op in makers):
                self._fail(f"{doc_id} ({doc.name!r}) is visible, but every create of it "
                           "failed: " + ", ".join(op.label() for op in makers))
        for doc in [d async for d in self.ledger.list()]:
            data = b"".join([chunk async for chunk in self.ledger.read(doc.id)])
            if hashlib.sha256(data).hexdigest() != doc.sha256:
                self._fail(f"{doc.id} v{doc.version} reads back other bytes")

    async def _check(self, *, settled: bool = False, reconciled: bool = True) -> None:
        """The invariants and the model; ``reconciled=False`` (the sweeper alone ran) lets
        pass what only ``reconcile --fix`` removes: a late client's untagged blob."""
        report = await check(self.ledger, settled=settled)
        if not reconciled:
            report.violations = [v for v in report.violations
                                 if not await self._late_put(v.invariant, v.subject)]
        if not report.ok:
            self._fail(report.render())
        await self._check_model()
        await self._check_attachments()
        await self._check_events()
        await self._check_variants()
        await self._check_delivery()

    async def _check_delivery(self, *, settled: bool = False) -> None:
        async with self.ledger.db.transaction(readonly=True) as conn:
            found = await self.deliveries.check(conn, self.offset, settled=settled)
        if found is not None:
            self._fail(found)

    async def _check_events(self) -> None:
        """Every committed change has exactly one event, in order per document, and no
        event is without its change: a document's events are ``document.ready`` (version 1)
        then one ``document.replaced`` per later version, then at most one
        ``document.deleted``, agreeing with its row (ready: the last event names its version
        and blob; gone: the last is the delete; pending: none); an acknowledged version has
        its event with the acknowledged SHA-256; an attachment's are ``attached`` once A4
        committed, then ``detached`` once it was detached, nothing for a blob never
        attached."""
        async with self.ledger.db.transaction(readonly=True) as conn:
            found = (await conn.execute(select(
                events.c.subject, events.c.type, events.c.version, events.c.blob_name,
                events.c.sha256, events.c.document_id).order_by(events.c.id))).all()
            docs = {row.id: row for row in (await conn.execute(select(
                DocumentRow.__table__))).all()}
            blob_rows = {row.name: row for row in (await conn.execute(select(
                BlobRow.__table__))).all()}
        by_subject: dict[str, list[Any]] = {}
        for row in found:
            by_subject.setdefault(row.subject, []).append(row)
        for subject, rows in by_subject.items():
            kinds = [row.type for row in rows]
            if rows[0].document_id is None:  # an attachment's
                blob = blob_rows.get(subject)
                expected = ["attachment.attached"] if blob is not None and \
                    blob.state == "attached" else ["attachment.attached", "attachment.detached"]
                if kinds != expected:
                    self._fail(f"attachment {subject} has events {kinds}, expected {expected}"
                               f" (its row: {blob.state if blob else 'gone'})")
                continue
            versions = [row.version for row in rows]
            changes = [row for row in rows if row.type != "document.deleted"]
            want = ["document.ready"] + ["document.replaced"] * (len(changes) - 1)
            if [row.type for row in changes] != want or \
                    [row.version for row in changes] != list(range(1, len(changes) + 1)) or \
                    kinds[:len(changes)] != want or len(kinds) - len(changes) > 1:
                self._fail(f"document {subject}'s events are out of order or repeated: "
                           f"{list(zip(kinds, versions, strict=True))}")
            doc = docs.get(subject)
            last = rows[-1]
            if doc is None or doc.status != "ready":
                if last.type != "document.deleted":
                    self._fail(f"document {subject} is {doc.status if doc else 'gone'} "
                               f"but its last event is {last.type} v{last.version}")
            elif (last.type, last.version, last.blob_name) != (
                    want[-1], doc.version, doc.blob_name):
                self._fail(f"document {subject} is ready at v{doc.version} ({doc.blob_name}) "
                           f"but its last event is {last.type} v{last.version}")
        for doc in docs.values():
            if doc.status == "ready" and doc.id not in by_subject:
                self._fail(f"document {doc.id} is ready without a document.ready event")
        for blob in blob_rows.values():  # a variant (owned by a document) has no events
            if blob.state == "attached" and blob.name not in by_subject and \
                    blob.owner_table != DocumentRow.__tablename__:
                self._fail(f"attachment {blob.name} is attached without its event")
        for doc_id, known in self.known.items():
            if known.held:  # its document.ready is written when it is accepted, not before
                continue
            shas = {row.version: row.sha256 for row in by_subject.get(doc_id, [])
                    if row.type != "document.deleted"}
            for version, sha in known.acked.items():
                if shas.get(version) != sha:
                    self._fail(f"acknowledged v{version} of {doc_id} has no event of its own "
                               f"(events: {shas})")
            if known.deleted and [row.type for row in by_subject.get(doc_id, [])][-1:] != \
                    ["document.deleted"]:
                self._fail(f"acknowledged delete of {doc_id} has no event")

    # -- rules -------------------------------------------------------------------------
    @initialize()
    def clean_start(self) -> None:
        self._run(self._check())

    @property
    def s3(self) -> S3Endpoint:
        if self._s3 is None:
            self._s3 = S3Endpoint(self.ledger, self.settings)
        return self._s3

    @rule(target=ops, name=st.sampled_from(NAMES), create_only=st.booleans())
    def start_s3_put(self, name: str, create_only: bool) -> Any:
        """PutObject through the S3 endpoint: a create when the key names no ready
        document (or with ``If-None-Match: *``), else a replace of the one it names at the
        version it shows (the endpoint reads it before any step, as here). A key naming a
        document no client was told of yet (a create past C4, unanswered): no step."""
        doc = self._run(visible(self.ledger, name))
        if doc is not None and doc.id not in self.known:
            return multiple()
        n = len(self.ops_run) + 1
        data = f"s3 put {n} of {name} ".encode() * 20
        if doc is None or create_only:
            op = self._op("create", name=name, group=next(self.groups), data=data, s3=True,
                          create_only=create_only)
        else:
            op = self._op("replace", name=name, doc_id=doc.id, expected=doc.version,
                          data=data, s3=True)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, name=st.sampled_from(NAMES))
    def start_s3_multipart(self, name: str) -> Any:
        """A multipart upload through the S3 endpoint, completed with ``If-None-Match: *``
        (a create only: the completion reads the key when it completes, not when the upload
        began, so a replace would not be at a version known here): CreateMultipartUpload,
        one UploadPart, CompleteMultipartUpload, stopping at each of their failpoints."""
        n = len(self.ops_run) + 1
        op = self._op("create", name=name, group=next(self.groups),
                      data=f"s3 multipart {n} of {name} ".encode() * 20, s3=True,
                      create_only=True, multipart=True)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, name=st.sampled_from(NAMES))
    def start_s3_delete(self, name: str) -> Any:
        """DeleteObject through the S3 endpoint: the delete of the document the key names
        at the version it shows (a key naming nothing, or a document no client was told of
        yet: no step)."""
        doc = self._run(visible(self.ledger, name))
        if doc is None or doc.id not in self.known:
            return multiple()
        op = self._op("delete", name=name, doc_id=doc.id, expected=doc.version, s3=True)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @precondition(lambda self: not self.s3_only)
    @rule(target=ops, name=st.sampled_from(NAMES), keyed=st.booleans())
    def start_create(self, name: str, keyed: bool) -> Op:
        group = next(self.groups)
        op = self._op("create", name=name, group=group,
                      key=f"key-{group}" if keyed else None,
                      data=_image(group) if name == IMAGE_NAME
                      else f"create {group} of {name} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, name=st.sampled_from(HELD_NAMES))
    def start_held_create(self, name: str) -> Op:
        group = next(self.groups)
        op = self._op("held", name=name, group=group,
                      data=f"held create {group} of {name} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @precondition(lambda self: any(k.held for k in self.known.values()))
    @rule(target=ops)
    def start_processing(self) -> Op:
        """A processing run that stops at each of its steps (a paused processing worker:
        another run claims its work once its lease is past)."""
        op = self._op("processing")
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

    @precondition(lambda self: not self.s3_only)
    @rule(target=ops, pick=st.integers(0, 3),
          version=st.sampled_from(["acknowledged", "visible", "stale"]))
    def start_replace(self, pick: int, version: str) -> Any:
        """Replace a document the client knows, expecting the version it last saw."""
        chosen = self._target(pick, version)
        if chosen is None:
            return multiple()
        n = len(self.ops_run) + 1
        image = self.known[chosen[0]].name == IMAGE_NAME
        op = self._op("replace", doc_id=chosen[0], expected=chosen[1],
                      data=_image(n) if image else f"replace {n} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @precondition(lambda self: not self.s3_only)
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

    @rule(target=ops, mode=st.sampled_from(["direct", "tus"]),
          name=st.sampled_from((*NAMES, None)), empty=st.sampled_from([False, False, True]))
    def start_upload(self, mode: str, name: str | None, empty: bool) -> Op:
        """A direct or tus upload of a document (``name``) or of an attachment (None)."""
        n = len(self.uploads) + 1
        data = b"" if empty else f"{mode} upload {n} of {name} ".encode() * 20
        small_parts = self.ledger.store.capabilities.min_part_size <= 1
        parts = [data[:len(data) // 2], data[len(data) // 2:]] \
            if mode == "tus" and small_parts and len(data) > 1 else [data]
        up = Upload(n, mode, name, data, self.offset, parts=parts)
        self.uploads.append(up)
        op = self._op("direct_begin" if mode == "direct" else "tus_create", upload=up)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, of=ops,
          request=st.sampled_from(["put", "put", "complete", "complete", "cancel"]))
    def upload_request(self, of: Op, request: str) -> Any:
        """A request of an upload's client: its bytes (the put to the store's URL or to
        ``serve``; a tus PATCH, the last of which completes), a completion (direct; a tus
        HEAD, as from another instance), a cancel (a tus termination). Several may run at
        once (a client retrying, two instances)."""
        up = of.upload
        if up is None or up.id is None:
            return multiple()
        kind = {("direct", "put"): "direct_put", ("direct", "complete"): "direct_complete",
                ("direct", "cancel"): "direct_cancel", ("tus", "put"): "tus_patch",
                ("tus", "complete"): "tus_head", ("tus", "cancel"): "tus_terminate",
                }[up.mode, request]
        if request == "cancel":
            up.cancelled = True
        op = self._op(kind, upload=up)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops)
    def start_stage(self) -> Op:
        """``Ledger.stage``: A1-A3, a blob owned by nobody until an application attaches it."""
        n = len(self.ops_run) + 1
        op = self._op("stage", data=f"staged {n} ".encode() * 20)
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, pick=st.integers(0, 3))
    def start_variant(self, pick: int) -> Any:
        """Ask for a document's thumbnail (made by this request if nobody made it)."""
        chosen = self._target(pick, "acknowledged")
        if chosen is None:
            return multiple()
        op = self._op("variant", doc_id=chosen[0])
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(pick=st.integers(0, 3))
    def attach(self, pick: int) -> None:
        """A4 in the application's transaction (the sqlalchemy integration's flush)."""
        free = [s for s in self.staged if s.owner is None and not s.lost]
        if free:
            self._run(self._attach(free[pick % len(free)]))

    @rule(pick=st.integers(0, 3), how=st.sampled_from(["clear", "delete owner"]))
    def detach(self, pick: int, how: str) -> None:
        """The application clears the attachment or deletes its row (same transaction)."""
        held = [s for s in self.staged if s.owner is not None and not s.detached]
        if held:
            self._run(self._detach(held[pick % len(held)], how))

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

    @rule(target=ops)
    def start_retagger(self) -> Op:
        """A retag worker run (the deferred retag's), stopping at its steps (a paused
        worker); with the retag inline it finds nothing owed."""
        op = self._op("retagger")
        self._event(f"op{op.n}", "start", op.label())
        self._run(self._start(op))
        return op

    @rule(target=ops, workers=st.integers(1, 2))
    def start_delivery(self, workers: int) -> Any:
        """Delivery worker runs (one event per claim) that stop at each of their steps: a
        paused worker, whose claim may lapse under it while another worker claims; two
        started one after the other race for the same due events."""
        started = []
        for _ in range(workers):
            op = self._op("delivery")
            self._event(f"op{op.n}", "start", op.label())
            self._run(self._start(op))
            started.append(op)
        return multiple(*started)

    @precondition(lambda self: any(op.kind == "delivery" for op in self._live()))
    @rule(pick=st.integers(0, 3))
    def step_delivery(self, pick: int) -> None:
        """Resume a paused delivery worker to its next step (the workers among the
        operations, so that their steps interleave with each other often enough)."""
        paused = [op for op in self._live() if op.kind == "delivery"]
        self._run(self._until_step(paused[pick % len(paused)]))

    @precondition(lambda self: self.offset < MAX_OFFSET and any(
        op.kind == "delivery" and op.point in MID_DELIVERY for op in self._live()))
    @rule(target=ops, pick=st.integers(0, 3), takes=st.booleans())
    def overtake_delivery(self, pick: int, takes: bool) -> Any:
        """A delivery worker paused between its claim and its mark, overtaken: its lease
        lapses (the clock past it), a second worker claims the same event, sends it (to a
        handler that ``takes`` it or refuses) and is paused before its own mark; then the
        first wakes and marks (a failure mark after its refused send: on its last attempt,
        ``dead``). The first's token was replaced: its mark must land nowhere, neither
        counting an attempt on the second's claim nor marking dead what the second
        delivered (the delivery checks then see either)."""
        paused = [op for op in self._live()
                  if op.kind == "delivery" and op.point in MID_DELIVERY]
        first = paused[pick % len(paused)]
        held = self.deliveries.holding(f"op{first.n}")
        if held is None:
            return multiple()
        self.signature.append(("overtake", ""))
        self._move_clock(JUMPS[0])  # past the event lease
        self.deliveries.refusing = not takes
        self._event("handler", "takes" if takes else "refuses", "events")
        second = self._op("delivery")
        self._event(f"op{second.n}", "start", second.label(), "to overtake", held)
        self._run(self._start(second))
        for _ in range(OVERTAKE_STEPS):
            if second.done or (second.point == "events.after_send"
                               and self.deliveries.holding(f"op{second.n}") == held):
                break
            self.step(second)
            self.consistent()
        while not first.done and first.point != "events.after_mark":
            self.step(first)
            self.consistent()
        return second

    @rule(refusing=st.booleans())
    def handler_health(self, refusing: bool) -> None:
        """The handler the events go to refuses them from now on (failed attempts, retries,
        dead events), or takes them again."""
        self.deliveries.refusing = refusing
        self._event("handler", "refuses" if refusing else "takes", "events")

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
        self.sweeps.append(self.offset)
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
        for up in self.uploads:
            await self._conclude(up)
        await self._process_all()
        self._move_clock(SETTLE_JUMP)
        for _ in range(4):
            self.sweeps.append(self.offset)
            report = await Sweeper(self.ledger).run_once()
            self._event("sweep", *[f"{k}={v}" for k, v in report.as_dict().items()
                                   if isinstance(v, int) and v and k != "batches"])
            self._move_clock(self.settings.delete_grace + 1)
            if not report.claimed:
                break
        await self._check(settled=True, reconciled=False)  # what the sweeper alone leaves
        await reconcile(self.ledger, fix=True, older_than=self.settings.upload_deadline)
        await self._check(settled=True)
        self.deliveries.refusing = False
        self._event("delivery", f"delivered={await deliver_all(self.ledger)}")
        await self._check_delivery(settled=True)

    async def _process_all(self) -> None:
        """Processing runs until none claims anything: every held document is decided (the
        check accepts every held creation's bytes: none is left held)."""
        while (report := await ProcessingWorker(self.ledger).run_once()).claimed:
            self._event("processing", *[f"{k}={v}" for k, v in report.as_dict().items()
                                        if isinstance(v, int) and v])
        left = [d for d, k in self.known.items() if k.held and not k.deleted
                and await self.ledger.hold_state(d) is not None]
        if left:
            self._fail(f"held after every processing run: {left}")

    async def _late_put(self, invariant: str, subject: str) -> bool:
        """Whether an I4 finding is a blob that a client put to its direct upload's own URL
        (a SAS: untagged; a presigned PUT: tagged ``pending``) after its intent was removed
        (the upload cancelled, or swept: the URL's expiry is the storage's clock, the sweep
        the database's): it has no row for the sweeper to find; ``reconcile --fix`` removes
        it."""
        late = {f"blob {up.blob}" for up in self.uploads
                if up.target is not None and up.put_acked and up.blob is not None}
        if invariant != "I4" or subject not in late:
            return False
        try:
            tags = await self.ledger.store.get_tags(subject.removeprefix("blob "))
        except BlobNotFound:
            return False
        return tags.get(STATE_TAG) in (None, PENDING_TAG[STATE_TAG])

    async def _conclude(self, up: Upload) -> None:
        """The client of a live upload finishes it: its bytes, then completions until one
        answers (each answer checked as any other)."""
        if up.id is None or up.cancelled or self._expired(up):
            return
        if up.mode == "direct":
            if not up.put_acked:
                await self._request(up, "direct_put")
            await self._request(up, "direct_complete")
            return
        await self._request(up, "tus_head")
        for _ in up.parts:
            if up.offset >= len(up.data) or up.answer is not None:
                break
            await self._request(up, "tus_patch")
        await self._request(up, "tus_head")

    async def _request(self, up: Upload, kind: str) -> None:
        op = self._op(kind, upload=up)
        self._event(f"op{op.n}", "start", op.label())
        await self._start(op)
        await self._finish(op)

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
            self.deliveries.uninstall()
            self.loop.run_until_complete(self._close())

    async def _close(self) -> None:
        for op in self._live():
            if op.task is not None:
                op.task.cancel()
                op.go.set()
        await asyncio.gather(*[op.task for op in self.ops_run if op.task is not None],
                             return_exceptions=True)
        await self.http.aclose()
        if self._s3 is not None:
            await self._s3.close()
        await self.ledger.close()


def _image(n: int) -> bytes:
    """A small PNG of its own for ``n`` (the documents named ``a`` are images)."""
    buffer = io.BytesIO()
    Image.new("RGB", (12 + n % 7, 10), (n * 37 % 256, n * 91 % 256, 60)).save(buffer, "PNG")
    return buffer.getvalue()


async def _visible(ledger: Ledger, doc_id: str) -> int | None:
    async for doc in ledger.list():
        if doc.id == doc_id:
            return doc.version
    return None


# -- running it --------------------------------------------------------------------------


def explore(backend: Backend, *, seconds: float, batch: int = 20, steps: int = 30,
            shrink_seconds: int = 60, on_batch: Callable[[], None] | None = None,
            retag: str = "inline", s3_only: bool = False) -> Stats:
    """Run the explorer on ``backend`` in batches of ``batch`` examples (``steps`` steps at
    most each) until ``seconds`` have passed, with ``BLOBLEDGER_RETAG`` = ``retag``; a
    violation raises (hypothesis shrinks it, for ``shrink_seconds`` at most, and prints the
    steps first). ``s3_only``: documents are written only through the S3 endpoint."""
    # Hypothesis shrinks for up to five minutes; each attempt here replays a whole run of
    # database and storage calls, so a shorter bound keeps a failing suite short.
    engine.MAX_SHRINKING_SECONDS = shrink_seconds
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(backend.start())
        machine = type(f"Explore_{backend.name.replace('-', '_')}_{retag}", (Explorer,),
                       {"backend": backend, "loop": loop, "retag": retag,
                        "s3_only": s3_only})
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
