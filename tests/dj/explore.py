"""The interleaving explorer of Django's writers (the model of ``tests/explore`` for the
Django integration): a hypothesis state machine whose writers are real Django saves, each on
a thread of its own (its own Django connection, so its own transaction), stopping at every
step of a field's save and resumed later, interleaved with the sweeper and the deletion
path and ``reconcile --fix`` of processes whose clocks run ahead.

The writers, on the test project's ``Invoice`` (its ``pdf`` on the ledger): the save of a
new row with a file, a replace (load, new file, save), a clear (``pdf.delete()``), a
delete, a queryset delete, a stale instance's save (loaded, stopped, then saved with only
another column changed: refused with ``InvalidInput`` when another save changed the file
meanwhile), each either alone (Django's autocommit: ``save_base``'s own atomic block) or
in a long transaction that stops before its commit, or rolled back after it wrote. Two
writers of one row race (both load, then save in any order of their steps). The steps a
writer stops at: ``explore.loaded`` (the instance loaded), ``explore.after_stage`` (the
field's file staged, the row not written: the ledger's staging on PostgreSQL,
``stage.after_*`` inside the transaction on SQLite), ``django.after_attach`` (A4 and the
detach done, not committed), ``explore.before_commit`` (a long transaction),
``django.after_commit`` (committed; on SQLite A3 not yet) and ``stage.after_tag``. At a
step a writer may crash instead of going on (the exception a killed request leaves:
its transaction rolls back, or, after the commit, A3 never runs).

After every step (the committed state, as any other connection sees it):

- the ledger's invariants I1, I3, I5 (:func:`blobledger.workers.invariants.check`); an
  attached blob still tagged ``pending`` is allowed only while its save is between its
  commit and A3 (SQLite), or crashed there (``reconcile --fix`` retags it);
- every row's file is an ``attached`` blob of that row and reads back bytes one of that
  row's writers gave (no row names a missing or ``deleting`` blob);
- a writer fails only with an error that says why: ``InvalidInput`` (a stale instance, and
  only if another writer touched the row), ``AttachLost`` (only after a sweeper ran past
  its staging's age), ``database is locked`` (SQLite: a paused transaction held the one
  write lock longer than the busy timeout), Django's own ``IntegrityError`` when two
  instances of a row another writer deleted both save it again (each an ``INSERT``), or the
  crash or rollback the model asked for.

Settled (every writer ended, the sweeper and the deletion path hours ahead, then
``reconcile --fix``): I4 too, nothing left over (no orphan left forever), and the rows as
above.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, OperationalError, connections, transaction
from django.test.utils import override_settings
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from blobledger.django.conf import close_ledgers, run
from blobledger.django.storage import using
from blobledger.errors import AttachLost, InvalidInput, SweeperBusy
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import InvariantReport, check
from blobledger.workers.reconciler import reconcile
from blobledger.workers.sweeper import SWEEP_LEASE, Sweeper, SweepReport
from tests.dj.conftest import backend_alias, storage
from tests.dj.explore_writers import BY_THREAD, Crash, RolledBack, Writer, step, stepping
from tests.dj.invoices.models import Invoice

#: how long a resumed writer may take to reach its next step before it counts as waiting
#: (for a lock another paused writer holds); it goes on by itself once the lock is free
WAIT = 0.5
#: how long a settle waits for writers that wait for each other before it calls it a hang
HANG = 90.0
#: how far ahead of the writers the sweeper's clock may jump at once (past the grace, the
#: upload deadline, sweep_after, an hour)
JUMPS = (31.0, 61.0, 301.0, 601.0, 3600.0)
#: where a writer may crash (the steps inside its transaction, and A3's wait)
CRASHABLE = ("explore.after_stage", "stage.after_insert", "stage.after_upload",
             "stage.after_confirm", "django.after_attach", "explore.before_commit",
             "django.after_commit")
#: the test project's BLOBLEDGER_SWEEP_AFTER: a sweep that sees a staging this old fences it
SWEEP_AFTER = 600.0
WRITERS = ("create", "replace", "clear", "delete", "qs_delete", "stale_save")


class Violation(AssertionError):
    """The integration broke an invariant or answered what the model cannot explain."""



@dataclass
class Stats:
    examples: int = 0
    steps: int = 0
    writers: int = 0
    refused: int = 0
    crashed: int = 0
    interleavings: set[tuple[str, ...]] = field(default_factory=set)


STATS = Stats()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DjangoExplorer(RuleBasedStateMachine):
    """Django's writers stopped at any step, interleaved with the resolvers ahead."""

    writers = Bundle("writers")

    def __init__(self) -> None:
        super().__init__()
        self.alias = backend_alias()
        block = dict(django_settings.BLOBLEDGER)
        url = str(block["STORE_URL"])
        scheme, _, rest = url.partition("://")
        fresh = f"x{uuid.uuid4().hex[:16]}"
        block["STORE_URL"] = (f"{scheme}://{rest.rstrip('/')}-{fresh}" if scheme == "file"
                              else f"{scheme}://{fresh}")
        self.override = override_settings(BLOBLEDGER=block)
        self.override.enable()
        close_ledgers()
        storage().forget_settings()
        self._empty()
        self.resolvers: list[threading.Thread] = []  # resolvers left waiting for a lock
        self.ahead = 0.0  # the sweeper's clock, ahead of the writers'
        self.sweeps: list[float] = []  # the sweeper offsets that ran
        self.all: list[Writer] = []
        self.shas: dict[int, set[str]] = {}  # the bytes each row's writers gave it
        self.changed: dict[int, int] = {}  # acknowledged changes of each row's file
        self.trace: list[str] = []
        self.broken = False
        STATS.examples += 1

    # -- plumbing ------------------------------------------------------------------------
    def _empty(self) -> None:
        with connections[self.alias].cursor() as cursor:
            for table in ("idempotency_keys", "uploads", "documents", "blobs", "events",
                          "event_deliveries", Invoice._meta.db_table):
                cursor.execute(f"DELETE FROM {table}")

    def _event(self, text: str) -> None:
        self.trace.append(text)
        with contextlib.suppress(InvalidArgument):
            note("# " + text)

    def _fail(self, message: str) -> None:
        self.broken = True
        recent = "\n".join(f"  {e}" for e in self.trace[-30:])
        raise Violation(f"{message}\nlast events:\n{recent}")

    def _live(self) -> list[Writer]:
        return [w for w in self.all if not w.done]

    def _rows(self) -> dict[int, str]:
        """The committed rows and the file each names."""
        with connections[self.alias].cursor() as cursor:
            cursor.execute(f"SELECT id, pdf FROM {Invoice._meta.db_table}")
            return {int(pk): str(name or "") for pk, name in cursor.fetchall()}

    def _ledger_run(self, ahead: float, work: Callable[[Ledger], Any]) -> Any:
        current = storage().settings_for(self.alias)

        async def main() -> Any:
            async with Ledger.from_settings(current.with_(clock_offset=ahead),
                                            migrate=False) as ledger:
                return await work(ledger)

        return run(main())

    # -- the writers ---------------------------------------------------------------------
    def _start(self, writer: Writer) -> Writer:
        self.all.append(writer)
        STATS.writers += 1
        if writer.pk is not None:
            self.shas.setdefault(writer.pk, set())
            if writer.data:
                self.shas[writer.pk].add(_sha(writer.data))

        def body() -> None:
            BY_THREAD[threading.get_ident()] = writer
            try:
                self._write(writer)
            except BaseException as exc:
                writer.error = exc
            finally:
                BY_THREAD.pop(threading.get_ident(), None)
                connections[self.alias].close()
                writer.done = True
                writer.arrived.set()

        writer.thread = threading.Thread(target=body, name=f"writer-{writer.n}", daemon=True)
        self._event(f"start {writer.label()}")
        writer.thread.start()
        self._untilstep(writer)
        return writer

    def _write(self, w: Writer) -> None:
        alias = self.alias
        block = (transaction.atomic(using=alias) if w.how != "alone"
                 else contextlib.nullcontext())
        with block:
            if w.kind == "create":
                row = Invoice(number=f"w{w.n}", pdf=ContentFile(w.data, name="f.pdf"))
                row.save(using=alias)
                w.pk = row.pk
                self.shas.setdefault(row.pk, set()).add(_sha(w.data))
            elif w.kind == "qs_delete":
                Invoice.objects.using(alias).filter(pk=w.pk).delete()
            else:
                row = Invoice.objects.using(alias).get(pk=w.pk)
                w.loaded = str(row.pdf.name or "")
                step("explore.loaded")
                if w.kind == "replace":
                    row.pdf = ContentFile(w.data, name="f.pdf")
                    row.save(using=alias)
                elif w.kind == "clear":
                    row.pdf.delete()
                elif w.kind == "delete":
                    row.delete(using=alias)
                else:  # stale_save: only another column changed
                    row.number = f"paid{w.n}"
                    row.save(using=alias)
            if w.how == "long":
                step("explore.before_commit")
            if w.how == "rollback":
                raise RolledBack

    def _untilstep(self, w: Writer) -> None:
        if not w.settled(WAIT):
            self._event(f"w{w.n} waits (a lock)")
            return
        self._observe(w)

    def _observe(self, w: Writer) -> None:
        if not w.done:
            self._event(f"w{w.n} @ {w.point}")
            return
        if w.judged:
            return
        w.judged = True
        exc = w.error
        if exc is None:
            self._event(f"w{w.n} acknowledged")
            if w.pk is not None and w.kind in ("replace", "clear", "create"):
                self.changed[w.pk] = self.changed.get(w.pk, 0) + 1
            return
        self._event(f"w{w.n} failed: {type(exc).__name__}: {str(exc)[:80]}")
        if isinstance(exc, Crash):
            STATS.crashed += 1
            return
        if isinstance(exc, RolledBack) and w.how == "rollback":
            return
        if isinstance(exc, Invoice.DoesNotExist) and w.kind != "create":
            return  # the row was deleted before it loaded
        if isinstance(exc, InvalidInput):
            STATS.refused += 1
            self._judge_refusal(w, exc)
            return
        if isinstance(exc, AttachLost) and w.swept_age >= SWEEP_AFTER:
            return  # a sweep since it began saw its staging past sweep_after
        if isinstance(exc, OperationalError) and "locked" in str(exc):
            return
        if isinstance(exc, IntegrityError) and w.kind != "create" and any(
                o.kind in ("delete", "qs_delete") and o.pk == w.pk for o in self.all):
            return  # Django's own: two instances of a deleted row both save it (INSERT)
        self._fail(f"{w.label()} failed: {type(exc).__name__}: {exc}")

    def _judge_refusal(self, w: Writer, exc: InvalidInput) -> None:
        """A refusal says the instance is stale: only if another writer of the row changed
        (or may have changed) its file after this one loaded it."""
        if w.kind != "stale_save":
            self._fail(f"{w.label()} refused: {exc}")
        others = [o for o in self.all if o is not w and o.pk == w.pk
                  and o.kind in ("replace", "clear", "delete", "qs_delete")]
        if not others:
            self._fail(f"{w.label()} refused as stale, but no other writer touched row "
                       f"{w.pk}: {exc}")

    # -- the checks ----------------------------------------------------------------------
    def _untagged(self) -> set[str]:
        """Blobs attached by a commit whose A3 has not run (stopped or crashed between)."""
        return {name for w in self.all for name in w.staged
                if "django.after_commit" in w.points and "stage.after_tag" not in w.points}

    def _check(self, *, settled: bool = False) -> None:
        STATS.steps += 1
        report: InvariantReport = self._ledger_run(
            self.ahead, lambda ledger: check(ledger, settled=settled))
        untagged = self._untagged()
        report.violations = [v for v in report.violations
                             if settled or not (v.invariant == "I1"
                                                and v.subject.removeprefix("attachment ")
                                                in untagged and "pending" in v.detail)]
        if not report.ok:
            self._fail(report.render())
        self._check_rows()

    def _check_rows(self) -> None:
        rows = self._rows()
        if not rows:
            return
        with connections[self.alias].cursor() as cursor:
            cursor.execute("SELECT name, state, owner_table, owner_key FROM blobs")
            blobs = {str(r[0]): (str(r[1]), r[2], r[3]) for r in cursor.fetchall()}
        found = storage()
        for pk, name in rows.items():
            if not name:
                continue
            state, table, key = blobs.get(name, ("missing", None, None))
            if state != "attached" or table != Invoice._meta.db_table:
                self._fail(f"row {pk} names {name}, which is {state} ({table} {key})")
            with using(self.alias), found.open(name, "rb") as handle:
                data = bytes(handle.read())
            # a create commits inside its save, before its writer knows the row's id
            creating = {_sha(w.data) for w in self.all
                        if w.kind == "create" and w.pk in (None, pk)}
            if _sha(data) not in self.shas.get(pk, set()) | creating:
                self._fail(f"row {pk}'s file {name} reads back bytes none of its writers "
                           "gave it")

    # -- rules ---------------------------------------------------------------------------
    def _pick_row(self, pick: int) -> int | None:
        rows = sorted(self._rows())
        return rows[pick % len(rows)] if rows else None

    def writer(self, kind: str, pk: int | None, how: str) -> Writer:
        """Start one writer (``pk``: its row; None for a create) to its first step."""
        n = len(self.all) + 1
        data = f"{kind} {n} ".encode() * 9 if kind in ("create", "replace") else b""
        return self._start(Writer(n, kind, pk, data, how=how, began_at=self.ahead))

    @rule(target=writers, how=st.sampled_from(["alone", "long", "rollback"]))
    def start_create(self, how: str) -> Writer:
        n = len(self.all) + 1
        return self._start(Writer(n, "create", None, f"create {n} ".encode() * 9, how=how,
                                  began_at=self.ahead))

    @rule(target=writers, kind=st.sampled_from(WRITERS[1:]), pick=st.integers(0, 3),
          how=st.sampled_from(["alone", "long", "rollback"]))
    def start_change(self, kind: str, pick: int, how: str) -> Any:
        pk = self._pick_row(pick)
        if pk is None:
            return multiple()
        n = len(self.all) + 1
        data = f"{kind} {n} ".encode() * 9 if kind == "replace" else b""
        return self._start(Writer(n, kind, pk, data, how=how, began_at=self.ahead))

    @rule(target=writers, first=st.sampled_from(WRITERS[1:]),
          second=st.sampled_from(["replace", "clear", "delete", "stale_save"]),
          pick=st.integers(0, 3), how=st.sampled_from(["alone", "long"]))
    def start_race(self, first: str, second: str, pick: int, how: str) -> Any:
        """Two writers of one row: both load it (or stage) before either saves."""
        pk = self._pick_row(pick)
        if pk is None:
            return multiple()
        started = []
        for kind in (first, second):
            n = len(self.all) + 1
            data = f"{kind} {n} ".encode() * 9 if kind == "replace" else b""
            started.append(self._start(Writer(n, kind, pk, data, how=how,
                                              began_at=self.ahead)))
        return multiple(*started)

    @rule(w=writers)
    def step(self, w: Writer) -> None:
        if w.done:
            return
        if w.point is not None and w.arrived.is_set():
            w.resume()
        self._untilstep(w)

    @rule(w=writers)
    def finish(self, w: Writer) -> None:
        """Resume a writer step after step until it ends (or waits for a lock)."""
        while not w.done and w.point is not None and w.arrived.is_set():
            w.resume()
            self._untilstep(w)

    @rule(w=writers)
    def crash(self, w: Writer) -> None:
        if w.done or w.point not in CRASHABLE or not w.arrived.is_set():
            return
        self._event(f"w{w.n} crashes at {w.point}")
        w.resume(crash=True)
        self._untilstep(w)

    def sweep(self) -> None:
        """The sweeper and the deletion path, on a thread of their own (on SQLite they wait
        for a paused writer's lock; busy after the busy timeout, as a real sweeper is)."""
        self.sweeps.append(self.ahead)
        ahead = self.ahead
        for w in self._live():  # the writers' clock is the real one: to this sweep its
            # staging looks ``ahead`` seconds older than it is
            w.swept_age = max(w.swept_age, ahead + time.monotonic() - w.started)
        report = self._resolve("sweep", "the sweeper", ahead,
                               lambda ledger: Sweeper(ledger).run_once())
        if report is not None:
            self._event(f"sweep +{ahead:g}s: {report.as_dict()}")

    def reconcile_fix(self) -> None:
        current = storage().settings_for(self.alias)
        ahead = self.ahead
        report = self._resolve("reconcile", "reconcile --fix", ahead, lambda ledger: reconcile(
            ledger, fix=True, older_than=current.sweep_after))
        if report is not None:
            self._event(f"reconcile --fix +{ahead:g}s: fixed {report.fixed}")

    def _resolve(self, label: str, who: str, ahead: float,
                 run: Callable[[Ledger], Any]) -> Any:
        """A resolver's run on a clock ``ahead``: its report, or None (told as an event) when
        it found the lock busy or still waits for a paused writer's; its errors fail."""
        try:
            report = self._resolver(lambda: self._ledger_run(ahead, run))
        except (SweeperBusy, OperationalError) as exc:
            self._event(f"{label} +{ahead:g}s busy: {type(exc).__name__}")
            return None
        if report is None:
            self._event(f"{label} +{ahead:g}s waits for a paused writer's lock")
            return None
        if report.errors:
            self._fail(f"{who} failed: {report.errors}")
        return report

    def _resolver(self, work: Callable[[], Any]) -> Any:
        """Run a resolver; None if it still waits after :data:`WAIT` (a paused writer holds
        SQLite's lock): it is then left to finish on its own thread."""
        box: list[Any] = []

        def main() -> None:
            try:
                box.append(work())
            except BaseException as exc:
                box.append(exc)

        thread = threading.Thread(target=main, daemon=True)
        thread.start()
        thread.join(WAIT)
        if thread.is_alive():
            self.resolvers.append(thread)
            return None
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    @rule(what=st.sampled_from(["sweep", "sweep", "reconcile", *JUMPS]))
    def resolve(self, what: str | float) -> None:
        """A sweep (stale intents, then the deletion path), a ``reconcile --fix``, or the
        resolvers' clock jumping ahead of the writers'."""
        if what == "sweep":
            self.sweep()
        elif what == "reconcile":
            self.reconcile_fix()
        elif self.ahead < 12 * 3600:
            self.jump_clock(float(what))

    def jump_clock(self, seconds: float) -> None:
        self.ahead += seconds
        self._event(f"the resolvers' clock +{seconds:g}s (ahead {self.ahead:g}s)")

    @invariant()
    def consistent(self) -> None:
        if not self.broken:
            self._check()

    # -- the end -------------------------------------------------------------------------
    def _finish_all(self) -> None:
        deadline = time.monotonic() + HANG
        while self._live():
            moved = False
            for w in self._live():
                if w.point is not None and w.arrived.is_set():
                    w.resume()
                    moved = True
                    w.settled(0.2)
                if w.done:
                    self._observe(w)
            if not moved and self._live():
                time.sleep(0.05)
            if time.monotonic() > deadline:
                self._fail("writers that never end: "
                           + ", ".join(f"{w.label()} after {w.points[-1:]}"
                                       for w in self._live()))
        for w in self.all:
            self._observe(w)
        for thread in self.resolvers:
            thread.join(HANG)

    def _settle(self) -> None:
        self._finish_all()
        current = storage().settings_for(self.alias)
        self.ahead += current.sweep_after + current.delete_grace + SWEEP_LEASE + 1
        for _ in range(4):
            report = self._sweep_when_free()
            if report.errors:
                self._fail(f"the sweeper failed: {report.errors}")
            self.ahead += current.delete_grace + 1
            if not report.claimed:
                break
        self._ledger_run(self.ahead, lambda ledger: reconcile(
            ledger, fix=True, older_than=current.sweep_after))
        self._check(settled=True)
        STATS.interleavings.add(tuple(self.trace))

    def _sweep_when_free(self) -> SweepReport:
        """A sweep once the SQLite sweep lock is free (a resolver left waiting may still
        hold it for a moment)."""
        deadline = time.monotonic() + HANG
        while True:
            try:
                return self._ledger_run(self.ahead,  # type: ignore[no-any-return]
                                        lambda ledger: Sweeper(ledger).run_once())
            except SweeperBusy:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def teardown(self) -> None:
        try:
            if not self.broken:
                self._settle()
        finally:
            for w in self._live():
                w.resume(crash=True)
            for w in self.all:
                if w.thread is not None:
                    w.thread.join(HANG)
            for thread in self.resolvers:
                thread.join(HANG)
            self.override.disable()
            close_ledgers()
            storage().forget_settings()



def explore(*, seconds: float, batch: int = 10, steps: int = 25,
            shrink_seconds: int = 60) -> Stats:
    """Run the machine in batches of ``batch`` examples until ``seconds`` have passed (on
    the database of the running test's backend)."""
    engine.MAX_SHRINKING_SECONDS = shrink_seconds  # each attempt replays real saves
    config = settings(max_examples=batch, stateful_step_count=steps, deadline=None,
                      database=None, print_blob=True, suppress_health_check=list(HealthCheck))
    deadline = time.monotonic() + seconds
    with stepping():
        while time.monotonic() < deadline:
            run_state_machine_as_test(DjangoExplorer, settings=config)
    return STATS

