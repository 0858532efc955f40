"""Interleavings written out by hand: the ones an audit of the first implementation found,
replayed through the explorer's machine (every step checked as in a generated run, and a
settle at the end). A generated run finds them too, given time; these find them at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.explore.backends import Backend
from tests.explore.machine import SETTINGS, Explorer, Op

Scenario = Callable[["Replay"], None]
PAST_SWEEP_AFTER = SETTINGS["sweep_after"] + 1
PAST_GRACE = SETTINGS["delete_grace"] + 1
PAST_DEADLINE = SETTINGS["upload_deadline"] + 1


class Replay:
    """Calls the machine's rules in a fixed order, checking the invariants after each."""

    def __init__(self, machine: Explorer) -> None:
        self.machine = machine

    def __getattr__(self, rule: str) -> Callable[..., Any]:
        method = getattr(self.machine, rule)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            self.machine.consistent()
            return result

        return call

    def create(self, name: str = "a", *, keyed: bool = False) -> Op:
        op: Op = self.start_create(name=name, keyed=keyed)
        return op

    def created(self, name: str = "a", *, keyed: bool = False) -> Op:
        op = self.create(name, keyed=keyed)
        self.finish(op)
        return op


def replace_paused_after_r3(r: Replay) -> None:
    """A replace sleeps after tagging its blob committed (R3); the sweeper hands its stale
    intent to the deletion path, which deletes the blob; the replace wakes and commits R4."""
    r.created()
    op: Op = r.start_replace(pick=0, version="acknowledged")
    r.machine.run_to(op, "replace.after_tag")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.jump_clock(seconds=PAST_GRACE)
    r.sweep()
    r.finish(op)


def create_paused_after_r3_rolled_forward(r: Replay) -> None:
    """A create sleeps after C3; the sweeper rolls it forward; the create wakes: it must
    answer the rolled-forward document (its own bytes)."""
    op = r.create(keyed=True)
    r.machine.run_to(op, "create.after_tag")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.finish(op)
    retry: Op = r.start_retry(original=op)
    r.finish(retry)


def upload_paused_before_publication(r: Replay) -> None:
    """A create sleeps with every byte staged; past the deadline the sweeper removes its
    intent and ``reconcile --fix`` clears the staged bytes; the create wakes."""
    op = r.create()
    r.machine.run_to(op, "put.before_commit")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.reconcile_fix()
    r.finish(op)


def upload_paused_while_reconciled(r: Replay) -> None:
    """A create sleeps mid-upload past its deadline; no sweep has run, so its pending row
    still names the blob, but ``reconcile --fix`` finds the staged bytes old; the create
    wakes: it must end acknowledged or with a clear error, never a storage error."""
    op = r.create()
    r.machine.run_to(op, "put.mid_stream")
    r.jump_clock(seconds=PAST_DEADLINE)
    r.reconcile_fix()
    r.finish(op)


def first_attempt_wakes_after_retry_took_over(r: Replay) -> None:
    """A keyed create sleeps after C1; past its lease (and the sweeper's margin) a retry
    under the key takes the intent over and sleeps mid-upload; the first attempt wakes and
    fails; the retry wakes and finishes."""
    op = r.create(keyed=True)
    r.jump_clock(seconds=PAST_SWEEP_AFTER + PAST_DEADLINE)
    retry: Op = r.start_retry(original=op)
    r.machine.run_to(retry, "put.mid_stream")
    r.finish(op)
    r.finish(retry)


def retry_after_a_replace(r: Replay) -> None:
    """A retry under the key of an acknowledged create, after the document was replaced:
    the first response again (version 1), not the current version."""
    op = r.created(keyed=True)
    replace: Op = r.start_replace(pick=0, version="acknowledged")
    r.finish(replace)
    retry: Op = r.start_retry(original=op)
    r.finish(retry)


def retry_after_a_delete(r: Replay) -> None:
    """A retry under the key of an acknowledged create whose document was deleted: the
    first response again, and never a second document."""
    op = r.created(keyed=True)
    delete: Op = r.start_delete(pick=0, version="acknowledged")
    r.finish(delete)
    retry: Op = r.start_retry(original=op)
    r.finish(retry)


def retry_with_other_bytes(r: Replay) -> None:
    """The key of an acknowledged create reused with other bytes: a conflict that changes
    nothing; a retry with the first bytes still gets the first response."""
    op = r.created(keyed=True)
    other: Op = r.start_retry_with_other_bytes(original=op)
    r.finish(other)
    retry: Op = r.start_retry(original=op)
    r.finish(retry)


SCENARIOS: list[Scenario] = [
    replace_paused_after_r3,
    create_paused_after_r3_rolled_forward,
    upload_paused_before_publication,
    upload_paused_while_reconciled,
    first_attempt_wakes_after_retry_took_over,
    retry_after_a_replace,
    retry_after_a_delete,
    retry_with_other_bytes,
]


def replay(backend: Backend, scenario: Scenario) -> None:
    """Run one scenario on a fresh ledger of ``backend``, then settle and check (I4 too)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(backend.start())
        machine = type("Replayed", (Explorer,), {"backend": backend, "loop": loop})()
        try:
            machine.clean_start()
            scenario(Replay(machine))
        finally:
            machine.teardown()
    finally:
        loop.run_until_complete(backend.stop())
        loop.close()
