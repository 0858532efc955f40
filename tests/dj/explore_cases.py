"""Scripted interleavings of Django's writers (:mod:`tests.dj.explore`), replayed on each
database by ``tests/dj/test_explore.py``: two saves of one row racing, a stale instance
saved after a replace, a rollback after staging, a crash between the attach and the commit,
a long delete with the deletion path an hour ahead."""

from __future__ import annotations

from collections.abc import Callable

from blobledger.errors import InvalidInput
from tests.dj.explore import DjangoExplorer
from tests.dj.explore_writers import Writer, stepping


def run_to(machine: DjangoExplorer, w: Writer, point: str) -> None:
    """Step ``w`` (checking after each step) until it stops at ``point``."""
    while w.point != point:
        if w.done:
            machine._fail(f"{w.label()} ended before it reached {point}")
        machine.step(w)
        machine.consistent()


def finish(machine: DjangoExplorer, w: Writer) -> None:
    while not w.done:
        machine.step(w)
        machine.consistent()


def _row(m: DjangoExplorer) -> int:
    pk = m._pick_row(0)
    assert pk is not None
    return pk


def two_saves_of_one_row_racing(m: DjangoExplorer) -> None:
    """Both load the row and stage their files; one attaches, the other waits for its row
    lock (PostgreSQL) or SQLite's write lock; the first commits, the second replaces it."""
    created = m.writer("create", None, "alone")
    finish(m, created)
    pk = _row(m)
    first, second = (m.writer("replace", pk, "alone"), m.writer("replace", pk, "alone"))
    run_to(m, first, "explore.after_stage")
    m.step(second)  # stages too (PostgreSQL), or waits for SQLite's one write lock
    run_to(m, first, "django.after_attach")
    m.step(second)  # waits for the first's row lock, or for SQLite's write lock
    m.sweep()
    finish(m, first)
    finish(m, second)
    m.consistent()


def a_stale_instance_saved_after_a_replace(m: DjangoExplorer) -> None:
    created = m.writer("create", None, "alone")
    finish(m, created)
    pk = _row(m)
    stale, fresh = (m.writer("stale_save", pk, "alone"), m.writer("replace", pk, "alone"))
    finish(m, fresh)
    finish(m, stale)
    if not isinstance(stale.error, InvalidInput):
        m._fail(f"{stale.label()} was not refused: {stale.error!r}")


def a_rollback_after_staging(m: DjangoExplorer) -> None:
    w = m.writer("create", None, "rollback")
    run_to(m, w, "explore.after_stage")
    m.jump_clock(601.0)
    m.sweep()
    finish(m, w)
    m.reconcile_fix()


def a_crash_between_attach_and_commit(m: DjangoExplorer) -> None:
    created = m.writer("create", None, "alone")
    finish(m, created)
    w = m.writer("replace", _row(m), "long")
    run_to(m, w, "django.after_attach")
    m.jump_clock(3600.0)
    m.sweep()
    m.crash(w)
    m.sweep()
    m.reconcile_fix()


def a_long_delete_with_the_deletion_path_ahead(m: DjangoExplorer) -> None:
    created = m.writer("create", None, "alone")
    finish(m, created)
    w = m.writer("delete", _row(m), "long")
    run_to(m, w, "explore.before_commit")
    m.jump_clock(3600.0)
    m.sweep()
    finish(m, w)
    m.sweep()


SCENARIOS = (two_saves_of_one_row_racing, a_stale_instance_saved_after_a_replace,
             a_rollback_after_staging, a_crash_between_attach_and_commit,
             a_long_delete_with_the_deletion_path_ahead)


def replay(scenario: Callable[[DjangoExplorer], None]) -> None:
    """One scripted interleaving, then the settle of any example."""
    with stepping():
        machine = DjangoExplorer()
        try:
            machine.consistent()
            scenario(machine)
        finally:
            machine.teardown()
