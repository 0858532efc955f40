"""Failpoints: named steps where a test can make the process die, raise or stall.

Enabled only by ``BLOBLEDGER_FAILPOINTS`` (read by the settings object, armed by
``Ledger.from_settings`` through :func:`configure`), e.g. ``create.after_upload=kill`` or
``sweep.before_resolve=raise;replace.after_tag=delay:2.5``. Several points are separated
by ``;``. With the variable unset, :func:`hit` is one lookup in an empty dict.

Every point, by where it is (each named once here; tests/test_failpoints.py checks that
this list and the points the sources hit are the same):

- the ledger: ``create.after_{insert,upload,confirm,tag,commit}``,
  ``create.before_take_over`` (a retry under an idempotency key read the key's record, still
  pending, and has not yet tried to take its intent over),
  ``replace.after_{insert,upload,confirm,tag,commit}``, ``delete.after_commit``,
  ``stage.after_{insert,upload,confirm,tag}`` (attachments);
- the Django integration: ``django.after_attach`` (A4 and the detach ran in the row's
  transaction, not yet committed) and ``django.after_commit`` (committed, before the save
  returns; on SQLite, where a save stages inside its transaction, before A3, whose
  ``stage.after_tag`` follows);
- uploads that outlive a request: ``{tus,direct}.after_create``, ``tus.after_part``,
  ``tus.after_publish``, ``direct.before_upload`` (``serve`` checked a direct upload's
  token, not yet put its bytes), ``direct.after_upload``, ``direct.before_check`` (a
  completion read the upload's row, not yet the blob's tags),
  ``{tus,direct}.after_{verify,confirm,tag,commit}`` (a document's),
  ``{tus,direct}.stage.after_{verify,confirm,tag,finish}`` (an attachment's) and
  ``upload.before_close_settled`` (a completion found the document made, its upload row
  still open, and has not yet closed it) and ``upload.before_terminate`` (a termination,
  tus's DELETE or S3's AbortMultipartUpload, read the upload open, not yet abandoned it);
- the S3 endpoint's multipart upload: ``multipart.after_insert`` (CreateMultipartUpload's
  C1 committed, the upload's row not yet read back nor its staged upload begun),
  ``multipart.after_stage`` (UploadPart's bytes staged in the store, the part not yet
  recorded), ``multipart.after_{verify,confirm,tag,commit}`` (CompleteMultipartUpload: the
  published parts' SHA-256 recorded; the key's name given; C3; C4 committed, the parts'
  rows not yet dropped; a completion that replaces passes ``replace.*`` instead of the
  last three) and ``multipart.{before,after}_abort`` (AbortMultipartUpload: the upload
  read, not yet terminated; terminated, its parts' rows not yet dropped);
- any upload to a store: ``put.mid_stream`` (after the store took a chunk),
  ``put.before_commit`` (every byte staged, before the create-only publication: the local
  ``link``, Azure's Put Block List) and ``put.after_commit`` (published, before the store's
  put returns: on S3 right after CompleteMultipartUpload); ``staged.before_commit`` (a
  staged upload's parts about to be published: before Put Block List,
  CompleteMultipartUpload or the local concatenation) and ``staged.after_commit`` (a staged
  upload published, its checksums not yet read back);
- the stores' conditional calls: ``delete.after_check`` (S3: the tags compared, before the
  DeleteObject conditioned on the ETag seen; the local disk: the tags or the ETag compared
  under the blob's ``flock``, before the unlink); ``store.set_tags.after_read`` (S3, the
  local disk under the blob's ``flock``, and Azure on an emulator that ignores the tag
  condition: the tags compared, not yet written; the local disk passes both from a worker
  thread, and only while :func:`armed`, so a test holds them through :func:`set_hook`); in
  every store's ``list_uncommitted``, ``scan.uncommitted`` (a name listed, before the calls
  that read its parts);
- the sweeper: ``sweep.after_{claim,fence,delete}``, ``sweep.before_resolve``,
  ``sweep.after_remove`` (swept rows removed, before the late conditional delete of their
  blobs) and the deletion path's ``deletion.after_{claim,tag,delete}``;
- the reconciler: ``reconcile.before_retag`` (``--fix`` read a row again and found it still
  owing its blob's retag, the conditioned retag not yet sent);
- the retag worker of the deferred retag (docs/protocol.md): ``retag.after_claim`` (owed
  retags claimed, none done) and ``retag.after_tag`` (a blob retagged, not yet recorded);
- the event delivery worker (docs/pipeline.md): ``events.after_claim`` (a batch claimed,
  nothing sent), ``events.before_log`` (a target called, its answer not yet in the attempt
  log), ``events.after_send`` (every target called and logged, the event not yet
  marked) and ``events.after_mark``;
- the processing of held documents (docs/pipeline.md): ``processing.after_claim``,
  ``processing.after_run`` (the verdict known, not recorded) and
  ``processing.after_verdict``;
- the making of a variant (docs/pipeline.md, :mod:`blobledger.variants.maker`):
  ``variant.after_{claim,read,render,upload,confirm,tag,attach}``.

The crash matrix (docs/crash-matrix.md) kills and pauses the ledger's, the uploads' and the
sweeper's points; the pipeline's have their own crash tests: ``events.*`` in
tests/events/test_crash.py, ``processing.*`` in tests/crash/test_held.py, ``variant.*`` in
tests/variants/test_crash.py and test_pause.py.

Actions: ``kill`` (SIGKILL this process, no cleanup of any kind), ``stop`` (SIGSTOP this
process: it pauses there, holding whatever it holds, until someone sends it SIGCONT; then it
goes on as if nothing happened), ``raise`` (:class:`FailpointError`), ``delay:SECONDS``
(sleep, then go on). A suffix ``@N`` acts on the N-th pass through the point only
(``put.mid_stream=kill@3``: die after the third chunk was taken).

In-process tests may instead install a hook with :func:`set_hook`: an async callable that
:func:`hit` awaits with the point's name at every point (before any configured action), so a
test can suspend one task at any step and resume it later. With neither actions nor a hook,
:func:`hit` still costs one emptiness test of a dict.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable

ENV = "BLOBLEDGER_FAILPOINTS"
#: an in-process hook, awaited with the point's name at every point
Hook = Callable[[str], Awaitable[None]]
#: the entry in ``_ACTIVE`` that stands for an installed hook (no point has this name)
_HOOKED = "\x00hook"


class FailpointError(RuntimeError):
    """Raised at a failpoint whose action is ``raise``."""


def _parse(text: str) -> dict[str, str]:
    points: dict[str, str] = {}
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        point, _, action = item.partition("=")
        points[point.strip()] = action.strip() or "raise"
    return points


_ACTIVE: dict[str, str] = {}
_PASSES: dict[str, int] = {}
_HOOK: list[Hook] = []


def configure(text: str) -> None:
    """Replace the active failpoints (for in-process tests); '' disables all (an installed
    hook stays)."""
    _ACTIVE.clear()
    _PASSES.clear()
    _ACTIVE.update(_parse(text))
    if _HOOK:
        _ACTIVE[_HOOKED] = "hook"


def set_hook(hook: Hook | None) -> None:
    """Install ``hook`` (awaited as ``hook(point)`` at every point, in the task that reached
    it, before the point's configured action) or, with None, remove it."""
    _HOOK.clear()
    _ACTIVE.pop(_HOOKED, None)
    if hook is not None:
        _HOOK.append(hook)
        _ACTIVE[_HOOKED] = "hook"


def armed() -> bool:
    """Whether any failpoint or hook is active (synchronous callers check before
    running :func:`hit` on a loop of their own)."""
    return bool(_ACTIVE)


async def hit(point: str) -> None:
    """Await the hook, if one is installed, then run the action configured for ``point``."""
    if not _ACTIVE:
        return
    if _HOOK:
        await _HOOK[0](point)
    action = _ACTIVE.get(point)
    if action is None:
        return
    if "@" in action:  # "kill@3": act on the third pass only
        action, _, nth = action.rpartition("@")
        _PASSES[point] = _PASSES.get(point, 0) + 1
        if _PASSES[point] != int(nth):
            return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)  # returns once someone sent SIGCONT
        return
    if action.startswith("delay:"):
        await asyncio.sleep(float(action.split(":", 1)[1]))
        return
    raise FailpointError(f"failpoint {point}")


def stream(data: AsyncIterable[bytes], point: str) -> AsyncIterable[bytes]:
    """``data``, passing ``point`` each time a chunk has been taken by the consumer (so a
    kill there dies mid-transfer); ``data`` itself when neither an action for ``point`` nor
    a hook is active."""
    if point not in _ACTIVE and not _HOOK:
        return data
    return _watched(data, point)


async def _watched(data: AsyncIterable[bytes], point: str) -> AsyncIterator[bytes]:
    async for chunk in data:
        yield chunk
        await hit(point)
