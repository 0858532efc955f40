"""What a run can be told: the scenarios (actor mixes aimed at one part of the protocol,
with pauses aimed at its points) and the mutants (a fence weakened by a switch of the
harness or of the simulated store: the historical bugs the simulation must find)."""

from __future__ import annotations

import ast
from typing import Any

from blobledger.stores.base import Condition, DeleteOutcome
from tests.sim.store import MemoryStore

#: the fences a run can be told to weaken (a monkeypatch of this harness, never of src/;
#: ``scripts/simulate --src-mutant`` runs a mutant of tests/mutate on a mutated copy of src/)
MUTANTS = {
    "sweep-delete-unconditional": "the sweeper's deletes without their pending condition",
    "store-tag-conditions-ignored": "the store's own tag checks skipped",
    "c4-no-attempt": "C4/R4's compare-and-set without its attempt term "
                     "(where:transitions:_commit_blob:blobs.attempt)",
    "r4-without-intent": "R4's blob row committed by its name alone, neither pending nor "
                         "the writer's (the paused replace: R4 before it required the "
                         "writer's own pending intent)",
    "local-no-flock": "the local store's conditional calls without their flock "
                      "(store:stores/local:_locked:without-flock)",
    "azure-commit-overwrites": "Azure's Put Block List without If-None-Match: * "
                               "(store:stores/azure/store:commit_staged:"
                               "commit_block_list-without-unpacked)",
    "direct-complete-no-reread": "a direct upload's completion that finds its blob tagged "
                                 "committed judges the upload row it read before (not read "
                                 "again: a twin completion may have verified it since)",
    "failed-mark-without-token": "the failed mark alone without the claim token "
                                 "(where:events:_failed:events.attempt)",
    "abandon-without-attempt": "a live writer's compensation without its attempt term "
                               "(where:transitions:_abandon:blobs.attempt)",
    "s3-sweeper-unfenced": "S3: the sweeper deletes under the store's own tag comparison "
                           "instead of fencing the row first (the paused S3 sweeper)",
    "s3-checksums-own-write": "S3: a staged upload's checksums written as tags of their "
                              "own after the completion, with the tags read at its start "
                              "(the whole-set retag)",
    "roll-forward-without-event": "the sweeper's roll-forward (C4 on a dead writer's "
                                  "behalf) makes the document ready without its "
                                  "document.ready event",
    "local-publish-discards-parts": "the local store's publication of a tus upload "
                                    "discards its parts on any outcome (a refused one "
                                    "too: no retried completion can publish them)",
    "reconcile-retag-unconditional": "reconcile --fix's retag of a ready document's blob "
                                     "without its condition (pending): its refusal gone "
                                     "(tag:reconciler:retag_if_still:"
                                     "set_tags-without-if_tags)",
    "a4-by-name": "A4 (an application's flush attaching a staged blob) by the blob's name "
                  "alone, neither pending nor the stager's (a sweeper fenced it meanwhile)",
    "s3-completion-lost-unanswered": "S3: CompleteMultipartUpload without its answer to a "
                                     "lost intent (a twin completion's C4 first: the "
                                     "endpoint then answered RequestTimeout, 'nothing was "
                                     "stored', not the document the twin made)",
    "held-release-undecided": "a held document released by an acceptance once no processor "
                              "rejected it, not once every processor accepted it (another "
                              "processor's work still pending)",
    "terminate-without-recheck": "a termination whose transaction was lost with its "
                                 "connection told success without reading the upload "
                                 "again (Resumable.terminate: tus DELETE and S3 "
                                 "AbortMultipartUpload, while the upload is still open)",
    "variant-attach-unfenced": "V4 attaches a variant's row by its name alone, not while it "
                               "is pending and its maker's (a maker paused past its lease, "
                               "its claim fenced and taken over, attaches anyway)",
    "events-mark-without-token": "the delivery marks without the claim token (_mine's "
                                 "events.attempt term: where:events:_dead:events.attempt, "
                                 "_delivered's, _failed's)",
}
#: actor mixes aimed at one part of the protocol each (``Config(**SCENARIOS[name])``);
#: ``focus``: points where a pause is ``focus_pause`` likely, not ``pause``
SCENARIOS: dict[str, dict[str, Any]] = {
    "default": {},
    # a writer paused after its confirm past sweep_after, the sweeper's delete and the
    # writer's inline retag both conditioned on pending, meeting inside the store
    "local-retag-delete": dict(
        retag="inline", writers=3, sweepers=1, retaggers=0, reconcilers=0, ops=4, names=50,
        rounds=40, sweep_periods=(1.0, 3.0, 10.0), pause=0.0, crash=0.0, jump=0.0, fault=0.0,
        focus={"create.after_confirm": (181.0, 200.0), "delete.after_check": (5.0, 30.0),
               "store.set_tags.after_read": (0.0, 1.0)}),
    # writers paused between C3 (their blob tagged committed) and C4 past sweep_after: the
    # sweeper rolls their creations forward (C4 on their behalf, with its event) and the
    # writer's own C4, woken, loses and answers the document the roll-forward made
    "rolled-forward": dict(
        retag="inline", writers=3, sweepers=1, retaggers=0, reconcilers=0, ops=4, names=50,
        rounds=40, sweep_periods=(1.0, 3.0, 10.0), pause=0.0, crash=0.0, jump=0.0, fault=0.0,
        focus={"create.after_tag": (181.0, 200.0)}),
    # the deferred retag: writers paused between their upload and C4/R4 past sweep_after
    # while a sweeper claims their intents and is paused before its conditioned delete
    # (the blob is still tagged pending: only C4's and R4's token stands between them)
    "deferred-paused-writers": dict(
        retag="deferred", writers=3, sweepers=1, retaggers=1, reconcilers=0, ops=4,
        names=50, rounds=40, sweep_periods=(1.0, 3.0, 10.0), pause=0.0, crash=0.0, jump=0.0,
        fault=0.0,
        focus={"create.after_upload": (181.0, 200.0), "replace.after_upload": (181.0, 200.0),
               "sweep.after_claim": (0.0, 10.0), "sweep.after_delete": (5.0, 30.0)}),
    # a create sent again under its key while the first attempt is paused after its upload
    # (past its lease and the margin: the retry takes the intent over); the first wakes to
    # a failed step, and its failure path must leave the retry's intent alone. No sweeper.
    "key-retry-race": dict(
        retag="deferred", writers=0, racers=3, sweepers=0, retaggers=1, reconcilers=0,
        ops=3, names=50, pause=0.0, crash=0.0, jump=0.0, fault=0.0, retry_after=125.0,
        focus={"create.after_upload": (0.0, 200.0)}, fail={"create.after_upload": 0.5}),
    # direct uploads completed twice at once, the second completion paused after it read
    # the upload's row while the first verifies, commits and answers
    "direct-duplicate-completion": dict(
        retag="inline", writers=1, direct=2, sweepers=1, retaggers=1, reconcilers=0, ops=3,
        crash=0.0005, fault=0.0,
        focus={"direct.before_check": (0.0, 5.0), "store.get_tags": (0.0, 5.0)}),
    # S3: a writer paused after its confirm past sweep_after while the sweeper, which read
    # the blob's tag, is paused before its DeleteObject (If-Match on the ETag alone)
    "s3-paused-sweeper": dict(
        store="s3", retag="inline", writers=3, sweepers=1, retaggers=0, reconcilers=0, ops=4,
        names=50, rounds=40, sweep_periods=(1.0, 3.0, 10.0), pause=0.0, crash=0.0, jump=0.0,
        fault=0.0,
        focus={"create.after_confirm": (181.0, 200.0), "delete.after_check": (5.0, 30.0),
               "sweep.after_fence": (5.0, 30.0), "store.set_tags.after_read": (0.0, 1.0)}),
    # S3: tus uploads completed twice at once, one paused right after its completion
    "s3-duplicate-completion": dict(
        store="s3", retag="inline", writers=1, tus=2, sweepers=1, retaggers=1,
        reconcilers=0, ops=3, crash=0.0005, fault=0.0,
        focus={"staged.after_commit": (5.0, 61.0), "staged.before_commit": (0.0, 5.0)}),
    # the default mix with the database's connection lost under one call in fifty of an
    # operation's (a statement, or a COMMIT that applied or did not)
    "db-drops": dict(drop=0.02, crash=0.0005),
    # the default mix, tus uploads besides, with one store write in twenty refused before it
    # applies (a full disk: the local store's ENOSPC; throttling: S3's 503 SlowDown once the
    # client's retries ran out), beside the writes whose answer is lost after they applied
    "store-refusals": dict(refuse=0.05, tus=1, crash=0.0005),
    # tus uploads on the local store completed twice at once, one store write in three
    # refused before it applies (a full disk): a completion whose publication was refused is
    # sent again by its client. No sweeper or reconciler ends an upload meanwhile.
    "local-tus-refusals": dict(
        store="local", retag="inline", writers=0, tus=3, sweepers=0, retaggers=1,
        reconcilers=0, ops=3, pause=0.0, crash=0.0, jump=0.0, fault=0.0, refuse=0.3),
    # the deferred retag with its owed retags paid by reconcile --fix too, the fix paused
    # between its re-read of the row and its retag while the retag worker pays it, the
    # document is replaced or deleted and the deletion path tags the blob deleting
    "reconcile-paused-retag": dict(
        retag="deferred", writers=3, sweepers=1, retaggers=1, reconcilers=2, ops=6, think=20.0,
        rounds=15, sweep_periods=(1.0, 3.0, 10.0), periods=(1.0, 3.0, 10.0), pause=0.0,
        crash=0.0, jump=0.0, fault=0.0, overrides={"delete_grace": 1.0},
        focus={"reconcile.before_retag": (30.0, 120.0), "deletion.after_tag": (20.0, 60.0)}),
    # attachments through SQLAlchemy: staged, then attached (the blob held before detached)
    # in an application's transaction, beside writers and the workers; an attacher may wait
    # past sweep_after (190 or 250 s) between its staging and its transaction
    "sqlalchemy-attachments": dict(
        attachers=3, writers=1, ops=4, pause=0.005, crash=0.0005, jump=0.0, rounds=20,
        sweep_periods=(1.0, 10.0, 30.0), attach_after=(0.0, 0.0, 190.0, 250.0)),
    # tus uploads completed twice at once on Azure's semantics
    "azure-duplicate-completion": dict(
        store="azure", retag="inline", writers=1, tus=2, sweepers=1, retaggers=1,
        reconcilers=0, ops=3, crash=0.0005, fault=0.0,
        focus={"staged.before_commit": (5.0, 61.0), "store.stat": (0.0, 5.0)}),
    # the S3 endpoint's writers: conditional PutObject and DeleteObject on two keys, and
    # multipart uploads completed twice at once (an abort racing them one time in four),
    # beside a writer and the workers; one completion paused before its commit or its check
    "s3-endpoint": dict(
        retag="inline", writers=1, s3_putters=2, s3_multipart=2, sweepers=1, retaggers=1,
        reconcilers=0, ops=4, crash=0.0005, fault=0.01,
        focus={"staged.before_commit": (0.0, 5.0), "store.stat": (0.0, 5.0),
               "multipart.after_verify": (0.0, 5.0)}),
    # held creations (two processors, one in two rejecting some bytes) and two processing
    # workers paused after their claim or their run, up to past the processing lease
    # (120 s): another worker claims the work again and decides, the paused one's verdict
    # then loses; a held creation is never visible before every processor accepted it
    "held-processing": dict(
        writers=1, held=2, processing=2, sweepers=1, retaggers=1, reconcilers=0, ops=4,
        crash=0.0005, fault=0.01,
        focus={"processing.after_claim": (0.0, 130.0), "processing.after_run": (0.0, 130.0),
               "processor.scan": (0.0, 5.0)}),
    # tus uploads completed twice at once with their termination (the client's DELETE)
    # racing them one time in two, the database's connection lost under one call in
    # thirty (a termination's COMMIT among them); buckets made, then creates into each
    # racing its deletion
    "terminate-and-buckets": dict(
        retag="inline", writers=1, tus=2, terminate=0.5, bucketeers=2, sweepers=1,
        retaggers=1, reconcilers=0, ops=4, crash=0.0005, fault=0.01, drop=0.03,
        focus={"staged.before_commit": (0.0, 5.0), "store.stat": (0.0, 5.0),
               "create.after_insert": (0.0, 3.0)}),
    # variants: each image's variant made by two processes at once, a replace or a delete
    # beside them now and then; a maker paused after its claim or its retag past the
    # variant lease (60 s), so the other takes its claim over and its V4 must lose
    "variants": dict(
        writers=1, variant_makers=2, sweepers=1, retaggers=1, reconcilers=0, ops=4,
        crash=0.0005, fault=0.01, overrides={"delete_grace": 5.0},
        focus={"variant.after_claim": (0.0, 90.0), "variant.after_tag": (0.0, 90.0)}),
    # delivery workers paused past their lease between send and mark
    "delivery-lease": dict(
        writers=2, sweepers=0, retaggers=1, reconcilers=0, deliverers=2, ops=4,
        receiver_fails=0.4, crash=0.0005, fault=0.0,
        focus={"events.after_send": (61.0, 61.0), "events.before_log": (61.0, 61.0)}),
    # the same with three attempts before dead and a backoff of a second: a failed attempt
    # is marked and the event claimed again, so a lapsed claim's failure could count twice
    "delivery-retry": dict(
        writers=2, sweepers=0, retaggers=1, reconcilers=0, deliverers=2, ops=4,
        receiver_fails=0.6, crash=0.0005, fault=0.0,
        overrides={"event_max_attempts": 3, "event_backoff": 1.0},
        focus={"events.after_send": (61.0, 61.0), "events.before_log": (61.0, 61.0)}),
}


def c4_without_attempt() -> dict[str, Any]:
    """C4/R4's compare-and-set without its ``attempt`` term (the intent still this
    attempt's): the statements the transitions' rooms use in its place (to restore), by
    ``module.name``: the writers' C4 and the sweeper's roll-forward."""
    import importlib

    from sqlalchemy import update

    from blobledger.protocol import single
    from blobledger.protocol.transitions import statements as t

    rooms = [importlib.import_module(f"blobledger.protocol.transitions.{room}")
             for room in ("documents", "workers")]  # (the package's ``documents`` is a table)
    weak = update(t.blobs).where(*t._mine[:2]).values(dict(t._commit_blob._values or {}))
    weakened: dict[str, Any] = {"_commit_blob": weak,
                                "_commit_blob_owed": weak.values(retag_due=t.NOW)}
    weakened["_c4_one"] = single.c4_deferred(weakened["_commit_blob_owed"], t._ready_document)
    saved: dict[str, Any] = {}
    for room in rooms:
        for name, value in weakened.items():
            if hasattr(room, name):
                saved[f"{room.__name__}.{name}"] = getattr(room, name)
                setattr(room, name, value)
    return saved


def abandon_without_attempt() -> dict[str, Any]:
    """A live writer's compensation (``_abandon``) without its ``attempt`` term (the mutant
    ``where:transitions:_abandon:blobs.attempt`` in this process): a stale attempt's failure
    path takes the intent of the retry that took it over (to restore)."""
    import importlib

    from sqlalchemy import update

    from blobledger.protocol.transitions import statements as t

    room = importlib.import_module("blobledger.protocol.transitions.documents")
    saved = {f"{room.__name__}._abandon": room._abandon}
    room._abandon = update(t.blobs).where(*t._mine[:2]).values(  # type: ignore[attr-defined]
        dict(t._abandon._values or {}))
    return saved


def r4_without_intent() -> dict[str, Any]:
    """The paused replace's bug: R4 moves its blob row to ``committed`` by the row's name
    alone (not only while it is pending and this attempt's), so a replace woken after the
    sweeper handed its intent to the deletion path points the document at bytes being
    deleted. ``commit_replace`` runs with its statements swapped (C4 keeps its own); returns
    what to restore."""
    import importlib
    import types

    from sqlalchemy import bindparam, update

    from blobledger.protocol.transitions import statements as t

    # (the package's ``documents`` is a table)
    room = importlib.import_module("blobledger.protocol.transitions.documents")

    weak = update(t.blobs).where(t.blobs.c.name == bindparam("b_name")).values(
        dict(t._commit_blob._values or {}))
    real = room.DocumentSteps.commit_replace
    scope = dict(real.__globals__, _commit_blob=weak,
                 _commit_blob_owed=weak.values(retag_due=t.NOW))
    weakened = types.FunctionType(real.__code__, scope, real.__name__, real.__defaults__,
                                  real.__closure__)
    weakened.__kwdefaults__ = real.__kwdefaults__
    room.DocumentSteps.commit_replace = weakened
    return {f"{room.__name__}.DocumentSteps.commit_replace": real}


def direct_without_reread() -> dict[str, Any]:
    """The duplicate direct completion's bug: ``DirectUploads.complete`` without its second
    read of the upload when the blob is no longer tagged ``pending`` (a twin completion
    verified and retagged it since the first read), so the completion takes its client for
    a liar. The real method's source with that one ``if`` removed; returns what to restore."""
    import __future__

    import ast
    import inspect
    import textwrap

    from blobledger.uploads import direct

    real = direct.DirectUploads.complete
    tree = ast.parse(textwrap.dedent(inspect.getsource(real)))
    dropped = []

    class Drop(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> ast.AST | None:
            if "upload.sha256 is None" in ast.unparse(node.test) and \
                    "self.find" in ast.unparse(node):
                dropped.append(node)
                return None
            return self.generic_visit(node)

    tree = ast.fix_missing_locations(Drop().visit(tree))
    assert len(dropped) == 1, "the re-read this mutant removes is not where it was"
    scope = dict(vars(direct))
    exec(compile(tree, direct.__file__, "exec",
                 flags=__future__.annotations.compiler_flag, dont_inherit=True), scope)
    direct.DirectUploads.complete = scope["complete"]  # type: ignore[method-assign]
    return {f"{direct.__name__}.DirectUploads.complete": real}


def s3_checksums_own_write() -> dict[str, Any]:
    """The S3 whole-set retag's bug: after CompleteMultipartUpload the store wrote the
    object's checksums as tags in a write of their own, the whole set being the tags given
    at the upload's start (``pending``) plus the checksums; S3 replaces the whole set, so a
    twin completion's retag to ``committed`` in between is undone. The real
    ``commit_staged``, then that write (to restore)."""
    from blobledger.stores.s3 import store as s3store

    real = s3store.S3Store.commit_staged

    async def commit_staged(self: Any, name: str, handle: str, parts: Any, *, tags: Any,
                            content_type: str | None = None) -> Any:
        digests = await real(self, name, handle, parts, tags=tags, content_type=content_type)
        s3 = await self._client()
        await s3.put_object_tagging(Bucket=self.bucket, Key=self._key(name),
                                    Tagging=s3store._tag_set(
                                        {**tags, "sha256": digests.sha256, "md5": digests.md5}))
        return digests

    s3store.S3Store.commit_staged = commit_staged  # type: ignore[method-assign]
    return {f"{s3store.__name__}.S3Store.commit_staged": real}


def roll_forward_without_event() -> dict[str, Any]:
    """The sweeper's roll-forward without ``document.ready``: ``WorkerSteps.roll_forward``
    run with an ``events`` whose ``document_ready`` writes nothing (C4 keeps its own event).
    Returns what to restore."""
    import importlib
    import types

    from blobledger.protocol import events

    room = importlib.import_module("blobledger.protocol.transitions.workers")
    real = room.WorkerSteps.roll_forward

    async def no_event(*args: Any, **kwargs: Any) -> None:
        return None

    silent = types.SimpleNamespace(**{n: getattr(events, n) for n in dir(events)
                                      if not n.startswith("__")})
    silent.document_ready = no_event
    weakened = types.FunctionType(real.__code__, dict(real.__globals__, events=silent),
                                  real.__name__, real.__defaults__, real.__closure__)
    weakened.__kwdefaults__ = real.__kwdefaults__
    room.WorkerSteps.roll_forward = weakened
    return {f"{room.__name__}.WorkerSteps.roll_forward": real}


def reconcile_retag_unconditional() -> dict[str, Any]:
    """``reconcile --fix``'s retag without ``if_tags`` (the mutant
    ``tag:reconciler:retag_if_still:set_tags-without-if_tags`` in this process): the real
    method's source with the keyword removed. Returns what to restore."""
    from blobledger.workers import reconciler

    real = reconciler._Merge.retag_if_still

    class Drop(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if ast.unparse(node.func).endswith("set_tags"):
                node.keywords = [k for k in node.keywords if k.arg != "if_tags"]
                dropped.append(node)
            return self.generic_visit(node)

    dropped: list[ast.Call] = []
    reconciler._Merge.retag_if_still = _rewritten(  # type: ignore[method-assign]
        real, reconciler, Drop(), "retag_if_still")
    assert len(dropped) == 1, "the retag this mutant unconditions is not where it was"
    return {f"{reconciler.__name__}._Merge.retag_if_still": real}


def _rewritten(real: Any, module: Any, transformer: ast.NodeTransformer, name: str) -> Any:
    """``real`` (a function of ``module``) compiled again from its source as rewritten by
    ``transformer``, in the module's namespace."""
    import __future__

    import inspect
    import textwrap

    tree = ast.fix_missing_locations(transformer.visit(
        ast.parse(textwrap.dedent(inspect.getsource(real)))))
    scope = dict(vars(module))
    exec(compile(tree, module.__file__, "exec",
                 flags=__future__.annotations.compiler_flag, dont_inherit=True), scope)
    return scope[name]


def a4_by_name() -> dict[str, Any]:
    """A4's compare-and-set without its state and staging-token terms: the statement the
    SQLAlchemy integration's flush runs (``transitions.attachments._attach``), by the blob's
    name and kind alone. Returns what to restore."""
    import importlib

    from sqlalchemy import update

    from blobledger.protocol.transitions import statements as t

    room = importlib.import_module("blobledger.protocol.transitions.attachments")
    real = room._attach
    room._attach = update(t.blobs).where(  # type: ignore[attr-defined]
        t._mine[0], *real.whereclause.clauses[3:]).values(dict(real._values or {})).returning(
        *real._returning)
    return {f"{room.__name__}._attach": real}


def s3_completion_lost_unanswered() -> dict[str, Any]:
    """The S3 completion's lost intent unanswered (the endpoint before it answered
    NoSuchUpload, or what a twin completion made): ``complete_multipart_upload``'s source
    with its ``except (IntentLost, BlobNotFound)`` dropped (the ``try`` body kept), so the
    twin's ``IntentLost`` reaches the client as the app maps it. Returns what to restore."""
    from blobledger.s3api import multipart

    real = multipart.complete_multipart_upload

    class Drop(ast.NodeTransformer):
        def visit_Try(self, node: ast.Try) -> Any:
            if any("IntentLost" in ast.unparse(h.type) for h in node.handlers if h.type):
                dropped.append(node)
                return node.body
            return self.generic_visit(node)

    dropped: list[ast.Try] = []
    multipart.complete_multipart_upload = _rewritten(
        real, multipart, Drop(), "complete_multipart_upload")
    assert len(dropped) == 1, "the handler this mutant drops is not where it was"
    return {f"{multipart.__name__}.complete_multipart_upload": real}


def held_release_undecided() -> dict[str, Any]:
    """The release's count of undecided work (``held._undecided``) counting rejections only:
    the first acceptance releases a document another processor has not decided. Returns
    what to restore."""
    from sqlalchemy import bindparam, func, select

    from blobledger.protocol import held
    from blobledger.protocol.transitions.statements import processing

    saved = {f"{held.__name__}._undecided": held._undecided}
    held._undecided = select(func.count()).select_from(processing).where(
        processing.c.document_id == bindparam("w_doc"),
        processing.c.version == bindparam("w_version"), processing.c.state == held.REJECTED)
    return saved


def terminate_without_recheck() -> dict[str, Any]:
    """``Resumable.terminate`` without its second read of the upload when the abandon's
    answer was lost with the connection (``abandoned is None``): the real method's source
    with that ``if`` removed. Returns what to restore."""
    from blobledger.uploads import resumable

    real = resumable.Resumable.terminate

    class Drop(ast.NodeTransformer):
        def visit_If(self, node: ast.If) -> Any:
            if ast.unparse(node.test) == "abandoned is None":
                dropped.append(node)
                return None
            return self.generic_visit(node)

    dropped: list[ast.If] = []
    resumable.Resumable.terminate = _rewritten(  # type: ignore[method-assign]
        real, resumable, Drop(), "terminate")
    assert len(dropped) == 1, "the re-read this mutant removes is not where it was"
    return {f"{resumable.__name__}.Resumable.terminate": real}


def variant_attach_unfenced() -> dict[str, Any]:
    """V4's compare-and-set (``variant_steps._attach``) by the row's name and kind alone,
    without its ``pending`` and maker's-token terms. Returns what to restore."""
    from sqlalchemy import update

    from blobledger.protocol import variant_steps as v
    from blobledger.protocol.models import BlobKind
    from blobledger.protocol.variant_owner import blobs

    saved = {f"{v.__name__}._attach": v._attach}
    v._attach = update(blobs).where(
        v._mine[0], blobs.c.kind == BlobKind.ATTACHMENT.value).values(
        dict(v._attach._values or {}))
    return saved


def restore(saved: dict[str, Any]) -> None:
    """Undo a mutant: each ``module[.Class].name`` back to what it was."""
    import importlib

    def owner(path: str) -> Any:
        try:
            return importlib.import_module(path)
        except ModuleNotFoundError:
            parent, _, name = path.rpartition(".")
            return getattr(owner(parent), name)

    for attribute, value in saved.items():
        path, _, name = attribute.rpartition(".")
        setattr(owner(path), name, value)


def marks_without_token(names: tuple[str, ...] = ("_delivered", "_failed", "_dead")
                        ) -> dict[str, Any]:
    """The delivery marks' ``_mine`` without its ``events.attempt == token`` term: a worker
    whose claim lapsed marks the event another worker claimed since (to restore). ``names``:
    the marks weakened (``("_failed",)``: the mutant ``where:events:_failed:events.attempt``
    in this process)."""
    from sqlalchemy import and_, bindparam, update

    from blobledger.protocol import events as e

    saved = {f"{e.__name__}.{n}": getattr(e, n) for n in names}
    mine = and_(e.events.c.event_id == bindparam("e_id"), e.events.c.state == e.PENDING)
    for name in names:
        setattr(e, name, update(e.events).where(mine).values(
            dict(getattr(e, name)._values or {})))
    return saved



def unconditional_sweep_store(store: MemoryStore) -> MemoryStore:
    """The historical bug: the sweeper's delete without its ``pending`` condition (a view of
    the same blobs whose ``delete_many`` deletes whatever is there)."""
    view = MemoryStore(clock=store.clock, point=store.point, after_write=store.after_write,
                       blobs=store.blobs, parts=store.parts, flock=store.flock,
                       _locks=store._locks)  # the same blobs, under the same locks

    async def delete_many(items: Any) -> list[DeleteOutcome]:
        outcomes = []
        for name, _tags in items:
            etag = view.blobs[name].etag if name in view.blobs else '"0"'
            deleted = await view._delete(name, Condition(etag=etag))
            outcomes.append(DeleteOutcome(name, deleted=deleted))
        return outcomes

    view.delete_many = delete_many  # type: ignore[method-assign]
    return view
