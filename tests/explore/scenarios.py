"""Interleavings written out by hand: the ones an audit of the first implementation found,
replayed through the explorer's machine (every step checked as in a generated run, and a
settle at the end). A generated run finds them too, given time; these find them at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from blobledger.workers.sweeper import SWEEP_LEASE
from tests.explore.backends import Backend
from tests.explore.machine import SETTINGS, Explorer, Op

Scenario = Callable[["Replay"], None]
PAST_SWEEP_AFTER = SETTINGS["sweep_after"] + 1
PAST_GRACE = SETTINGS["delete_grace"] + 1
PAST_DEADLINE = SETTINGS["upload_deadline"] + 1
PAST_EVENT_LEASE = SETTINGS["event_lease"] + 1


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

    def delivery(self) -> Op:
        """A delivery worker started (stopped at its first step, or finished)."""
        self.start_delivery(workers=1)
        return self.machine.ops_run[-1]

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


def direct_upload(r: Replay, *, attachment: bool = False) -> Op:
    """A direct upload whose client has put its bytes."""
    op: Op = r.start_upload(mode="direct", name=None if attachment else "a", empty=False)
    r.finish(op)
    r.finish(r.upload_request(of=op, request="put"))
    return op


def duplicate_completion_before_the_first_verified(r: Replay) -> None:
    """Two completions of one direct upload: the second read the upload's row, then sleeps
    before it reads the blob's tags; the first completes (C3, C4); the second wakes: it must
    answer the document, not give the upload up."""
    upload = direct_upload(r)
    second: Op = r.upload_request(of=upload, request="complete")
    r.machine.reach(second, "store.before_get_tags")
    r.finish(r.upload_request(of=upload, request="complete"))
    r.finish(second)


def duplicate_staged_completion_before_the_first_verified(r: Replay) -> None:
    """As above for an attachment's upload: the first completion answered "staged"; the
    second must not hand the staged blob to the deletion path (it is attached afterwards)."""
    upload = direct_upload(r, attachment=True)
    second: Op = r.upload_request(of=upload, request="complete")
    r.machine.reach(second, "store.before_get_tags")
    r.finish(r.upload_request(of=upload, request="complete"))
    r.finish(second)
    r.attach(pick=0)


def duplicate_completion_paused_reading_checksums(r: Replay) -> None:
    """Two completions of one direct upload: the first sleeps as it reads the stored bytes'
    checksums (S3 once repaired them by rewriting a tag set read while the blob was
    pending); the second completes (C3, C4); the first wakes."""
    upload = direct_upload(r)
    first: Op = r.upload_request(of=upload, request="complete")
    r.machine.reach(first, "store.before_digest_stored")
    r.finish(r.upload_request(of=upload, request="complete"))
    r.finish(first)


def tus_head_elsewhere_while_publication_sleeps(r: Replay) -> None:
    """A tus upload's last PATCH publishes its parts and sleeps before it reads back the
    checksums; a HEAD (another instance) completes the upload; the PATCH wakes."""
    upload: Op = r.start_upload(mode="tus", name="a", empty=False)
    r.finish(upload)
    for _ in range(2):  # the parts but the last (one part where parts must be large)
        if upload.upload is not None and len(upload.upload.parts) > 1 \
                and upload.upload.offset == 0:
            r.finish(r.upload_request(of=upload, request="put"))
    last: Op = r.upload_request(of=upload, request="put")
    r.machine.reach(last, "staged.after_commit")
    r.finish(r.upload_request(of=upload, request="complete"))
    r.finish(last)


def retry_completes_while_the_first_attempt_sleeps_after_publishing(r: Replay) -> None:
    """A keyed create sleeps right after its publication (on S3: the multipart upload
    completed, its tags not yet written back); past its lease a retry under the key takes
    the intent over and completes (C3, C4); the first attempt wakes."""
    op = r.create(keyed=True)
    r.machine.reach(op, "put.before_commit")
    r.step(op)  # the publication itself, to the next step (S3: put.after_commit)
    r.jump_clock(seconds=PAST_SWEEP_AFTER + PAST_DEADLINE)
    r.finish(r.start_retry(original=op))
    r.finish(op)


def sweeper_paused_inside_its_delete(r: Replay) -> None:
    """A keyed create sleeps after its upload; past sweep_after a sweeper claims the stale
    intent and sleeps inside its delete, after comparing the tags (S3: before the
    ETag-conditioned DeleteObject); past the claim's lease a retry under the key finishes
    and is acknowledged; the sweeper wakes."""
    op = r.create(keyed=True)
    r.machine.reach(op, "create.after_upload")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    sweeper: Op = r.start_sweeper()
    r.machine.reach(sweeper, "sweep.after_claim")
    r.step(sweeper)  # into the delete (S3: delete.after_check)
    r.jump_clock(seconds=SWEEP_LEASE + PAST_SWEEP_AFTER)
    r.finish(r.start_retry(original=op))
    r.finish(sweeper)
    r.finish(op)


def direct_put_to_serve_paused_while_swept(r: Replay) -> None:
    """On a store without URLs of its own (local disk), the content PUT to ``serve`` sleeps
    before publishing; past the expiry the sweeper removes the intent; the PUT wakes: it must
    not answer 201."""
    upload: Op = r.start_upload(mode="direct", name="a", empty=False)
    r.finish(upload)
    put: Op = r.upload_request(of=upload, request="put")
    if put.done:
        return  # the store took the bytes itself (a URL of its own)
    r.machine.reach(put, "put.before_commit")
    r.jump_clock(seconds=PAST_SWEEP_AFTER + PAST_DEADLINE)
    r.sweep()
    r.finish(put)


def direct_put_after_its_intent_was_swept(r: Replay) -> None:
    """A direct upload's client puts its bytes to the store's own URL only after the sweeper
    removed the upload's intent (the URL's expiry is the storage's clock, which the explorer
    never moves: a storage clock behind the database's): a blob with no row, on Azure
    untagged. The sweeper never sees it; ``reconcile --fix`` deletes it (the settle checks
    I4 after it). The URL, still valid, then creates the name once more: a second orphan for
    the next settle, never an overwrite."""
    upload: Op = r.start_upload(mode="direct", name="a", empty=False)
    r.finish(upload)
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.finish(r.upload_request(of=upload, request="put"))
    r.settle()
    r.finish(r.upload_request(of=upload, request="put"))


def upload_lands_after_the_sweepers_delete(r: Replay) -> None:
    """A create sleeps inside its upload; a sweeper claims its stale intent, deletes the
    blob (not there yet) and sleeps before removing the row; the create's upload lands, its
    confirm loses with the row still there, so it leaves the blob to the sweeper, which
    wakes and removes the row. The sweeper deletes once more after removing the row: the
    sweeper alone must leave nothing behind."""
    op = r.create(keyed=True)
    r.machine.run_to(op, "put.mid_stream")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    sweeper: Op = r.start_sweeper()
    r.machine.run_to(sweeper, "sweep.after_delete")
    r.finish(op)
    r.finish(sweeper)


def variant_maker_paused_while_its_version_ended(r: Replay) -> None:
    """A variant's maker sleeps after tagging its blob committed; a replace ends the version
    (and a second request made the new version's variant meanwhile); the maker wakes: its
    attach finds the version gone, its claim goes to the deletion path, and it answers the new
    version's variant, made once."""
    r.created("a")
    maker: Op = r.start_variant(pick=0)
    r.machine.run_to(maker, "variant.after_tag")
    r.finish(r.start_replace(pick=0, version="acknowledged"))
    r.finish(r.start_variant(pick=0))
    r.finish(maker)


def variant_maker_paused_past_its_lease(r: Replay) -> None:
    """A variant's maker sleeps after its upload past its lease; a second request takes the
    claim over (fencing it) and makes the variant; the first wakes, loses its confirm and
    answers the second's variant. Then the sweeper and the deletion path remove the fenced
    blob."""
    r.created("a")
    first: Op = r.start_variant(pick=0)
    r.machine.run_to(first, "variant.after_upload")
    r.jump_clock(seconds=SETTINGS["variant_lease"] + 1)
    r.finish(r.start_variant(pick=0))
    r.finish(first)
    r.jump_clock(seconds=PAST_GRACE)
    r.sweep()


def variant_maker_paused_while_swept(r: Replay) -> None:
    """A variant's maker sleeps after its confirm past the sweep cutoff; the sweeper fences
    the claim and the deletion path deletes its blob; the maker wakes, its retag finds no
    blob, and it claims afresh."""
    r.created("a")
    maker: Op = r.start_variant(pick=0)
    r.machine.run_to(maker, "variant.after_confirm")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.jump_clock(seconds=PAST_GRACE)
    r.sweep()
    r.finish(maker)


#: interleavings that broke the writers added after the documents', with the backends whose
#: semantics they exercise (S3: unconditional tag writes, ETag-only deletes)
#: past the processing lease of a paused processing run
PAST_PROCESSING_LEASE = 601.0


def processing_paused_past_its_lease(r: Replay) -> None:
    """A held create, rolled forward by the sweeper while its writer sleeps after C3 (held,
    not ready); a processing run sleeps after its verdict is known, past its lease; another
    run claims the work and accepts it; the first wakes and decides nothing."""
    writer: Op = r.start_held_create(name="h")
    r.machine.run_to(writer, "create.after_tag")
    r.jump_clock(seconds=PAST_SWEEP_AFTER)
    r.sweep()
    r.finish(writer)
    paused: Op = r.start_processing()
    r.machine.run_to(paused, "processing.after_run")
    r.jump_clock(seconds=PAST_PROCESSING_LEASE)
    r.finish(r.start_processing())
    r.finish(paused)
    r.settle()


def delivery_paused_past_its_lease(r: Replay) -> None:
    """A delivery worker's attempt is refused by the handler and the worker sleeps before its
    mark past its claim's lease; a second worker claims the event and delivers it; the first
    wakes: its failure mark must not land on the second's claim."""
    r.created()
    r.handler_health(refusing=True)
    first = r.delivery()
    r.machine.run_to(first, "events.after_send")
    r.jump_clock(seconds=PAST_EVENT_LEASE)
    r.handler_health(refusing=False)
    second = r.delivery()
    r.machine.run_to(second, "events.after_send")
    r.finish(first)
    r.finish(second)


def second_delivery_while_the_first_holds(r: Replay) -> None:
    """A second delivery worker runs while the first holds its claim (lease running): it
    claims nothing."""
    r.created()
    first = r.delivery()
    r.finish(r.delivery())
    r.finish(first)


WRITERS: list[tuple[Scenario, str]] = [
    (duplicate_completion_before_the_first_verified, "sqlite-local"),
    (duplicate_staged_completion_before_the_first_verified, "sqlite-local"),
    (duplicate_completion_paused_reading_checksums, "postgresql-s3"),
    (tus_head_elsewhere_while_publication_sleeps, "postgresql-s3"),
    (retry_completes_while_the_first_attempt_sleeps_after_publishing, "postgresql-s3"),
    (sweeper_paused_inside_its_delete, "postgresql-s3"),
    (direct_put_to_serve_paused_while_swept, "sqlite-local"),
    (direct_put_after_its_intent_was_swept, "postgresql-azure"),
    (direct_put_after_its_intent_was_swept, "postgresql-s3"),
    (upload_lands_after_the_sweepers_delete, "sqlite-local"),
    (upload_lands_after_the_sweepers_delete, "postgresql-azure"),
    (upload_lands_after_the_sweepers_delete, "postgresql-s3"),
    (variant_maker_paused_while_its_version_ended, "sqlite-local"),
    (variant_maker_paused_while_its_version_ended, "postgresql-azure"),
    (variant_maker_paused_past_its_lease, "sqlite-local"),
    (variant_maker_paused_past_its_lease, "postgresql-s3"),
    (variant_maker_paused_while_swept, "sqlite-local"),
    (variant_maker_paused_while_swept, "postgresql-azure"),
    (delivery_paused_past_its_lease, "sqlite-local"),
    (second_delivery_while_the_first_holds, "sqlite-local"),
]

SCENARIOS: list[Scenario] = [
    replace_paused_after_r3,
    create_paused_after_r3_rolled_forward,
    upload_paused_before_publication,
    upload_paused_while_reconciled,
    first_attempt_wakes_after_retry_took_over,
    retry_after_a_replace,
    retry_after_a_delete,
    retry_with_other_bytes,
    processing_paused_past_its_lease,
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
