"""``blobledger doctor``: does the configured store have what the protocol relies on?

Checks, each measured by writing small probe blobs named by :mod:`blobledger._base.names` under
``doctor/`` (all deleted at the end, even on failure):

=====================================  =====  ==============================================
check                                  must   how
=====================================  =====  ==============================================
create-only enforced (409 or 412)      yes    a second create-only put of a name is refused
index tags supported                   yes    tags written with a put read back unchanged
permission to write tags               yes    an unconditional tag update is accepted
tag-guarded delete enforced            yes    a delete conditioned on the wrong tag is refused
tag-conditioned tag update enforced    yes    a tag update conditioned on the wrong tag is
                                              refused (Azurite ignores it: a known gap)
soft delete                            no     service properties (on / off / unknown)
lifecycle rule                         no     needs the management API: reported, not guessed
retag lag                              no     deferred retag: the oldest owed retag, from the
                                              database, against BLOBLEDGER_RETAG_WARN_AFTER
event delivery                         no     webhooks: the oldest pending event's wait,
                                              against twice BLOBLEDGER_EVENT_INTERVAL plus
                                              BLOBLEDGER_WORKER_GRACE; dead events
=====================================  =====  ==============================================

Azure stores are probed with the SDK directly (:mod:`blobledger.workers.doctor.azure`), to
report the service's own status codes; every other store through the
:class:`~blobledger.stores.Store`
contract, here. A failed must-have makes the command exit non-zero.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from blobledger._base.names import new_blob_name
from blobledger.errors import BlobAlreadyExists, ConditionNotMet, StoreError
from blobledger.stores import Store
from blobledger.stores.base import Tags
from blobledger.stores.local import LocalStore

PASS, FAIL, GAP, INFO, UNKNOWN, WARN = "pass", "fail", "gap", "info", "unknown", "warn"
PROBE_PREFIX = "doctor"
CREATE_ONLY = "create-only enforced (409 or 412)"
TAGS = "index tags supported"
TAG_WRITE = "permission to write tags"
GUARDED_DELETE = "tag-guarded delete enforced"
GUARDED_TAGS = "tag-conditioned tag update enforced"
ETAG_DELETE = "ETag-conditioned delete enforced"
SOFT_DELETE = "soft delete"
LIFECYCLE = "lifecycle rule (blobledger lifecycle-policy)"
PENDING: Tags = {"state": "pending"}
COMMITTED: Tags = {"state": "committed"}
NO_MATCH: Tags = {"state": "no-such-state"}


@dataclass(frozen=True)
class Check:
    name: str
    must: bool
    status: str  # pass | fail | gap (known emulator gap) | info | unknown | warn
    detail: str

    @property
    def failed(self) -> bool:
        return self.must and self.status == FAIL


@dataclass
class Report:
    store: str
    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [check for check in self.checks if check.failed]

    def add(self, name: str, must: bool, status: str, detail: str) -> None:
        self.checks.append(Check(name, must, status, detail))

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "ok": not self.failed,
                "checks": [{**asdict(c), "failed": c.failed} for c in self.checks]}

    def render(self) -> str:
        rows = [("check", "must", "result", "detail")] + [
            (c.name, "yes" if c.must else "no", c.status.upper(), c.detail) for c in self.checks]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [f"store: {self.store}"]
        for row in rows:
            lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3]))
                         + "  " + row[3])
        verdict = ("all must-have checks passed" if not self.failed else
                   "failed must-have checks: " + ", ".join(c.name for c in self.failed))
        lines.append(verdict)
        return "\n".join(lines) + "\n"

    def summary(self) -> str:
        """One line naming what is missing (for the error line of a failed run)."""
        return "; ".join(f"{c.name}: {c.detail}" for c in self.failed)


async def _probe(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def store_report(
    store: Store, extras: Callable[[Report], Awaitable[None]] | None = None
) -> Report:
    """The checks through the Store contract, then the backend's own (``extras``)."""
    report = Report(store.url)
    written: list[str] = []

    async def put(tags: Tags, data: bytes = b"blobledger doctor probe") -> str:
        name = new_blob_name(PROBE_PREFIX, "probe.bin")
        written.append(name)
        await store.put(name, _probe(data), tags=tags)
        return name

    try:
        first = await put(PENDING)
        try:
            await store.put(first, _probe(b"other bytes"), tags=PENDING)
            report.add(CREATE_ONLY, True, FAIL, "a second create-only put was accepted")
        except BlobAlreadyExists:
            report.add(CREATE_ONLY, True, PASS, "second put refused (BlobAlreadyExists)")

        try:
            tags = await store.get_tags(first)
            report.add(TAGS, True, PASS if tags == dict(PENDING) else FAIL,
                       f"read back {tags}")
        except StoreError as exc:
            report.add(TAGS, True, FAIL, f"tags not readable: {exc}")
        try:
            await store.set_tags(first, COMMITTED)
            report.add(TAG_WRITE, True, PASS, "tag update accepted")
        except StoreError as exc:
            report.add(TAG_WRITE, True, FAIL, f"tag update refused: {exc}")

        guarded = await put(COMMITTED)
        try:
            await store.delete(guarded, if_tags=PENDING)
            report.add(GUARDED_DELETE, True, FAIL, "a committed blob was deleted under "
                       "the condition state=pending")
        except ConditionNotMet:
            deleted = await store.delete(guarded, if_tags=COMMITTED)
            if store.capabilities.state_conditioned_delete:
                report.add(GUARDED_DELETE, True, PASS if deleted else FAIL,
                           "wrong tag refused (ConditionNotMet), matching tag deleted")
            else:
                report.add(GUARDED_DELETE, False, INFO if deleted else FAIL,
                           "no tag-conditioned delete in this service: the store compares "
                           "the tag first and deletes under the ETag it saw; the database "
                           "fence guards the rest")
        etagged = await put(PENDING)
        try:
            await store.delete(etagged, if_etag='"0000"')
            report.add(ETAG_DELETE, True, FAIL, "a delete under a stale ETag was accepted")
        except ConditionNotMet:
            report.add(ETAG_DELETE, True, PASS, "stale ETag refused (ConditionNotMet)")

        try:
            await store.set_tags(first, PENDING, if_tags=NO_MATCH)
            report.add(GUARDED_TAGS, True, FAIL, "a tag update under a wrong condition "
                       "was accepted")
        except ConditionNotMet:
            if store.capabilities.state_conditioned_transition:
                report.add(GUARDED_TAGS, True, PASS, "wrong tag refused (ConditionNotMet)")
            else:
                report.add(GUARDED_TAGS, True, GAP, "known gap of this backend: the service "
                           "does not enforce the condition on tag updates (the store "
                           "compares first; the database fence guards the rest)")
        if extras is not None:
            await extras(report)
        else:
            report.add(SOFT_DELETE, False, INFO, "n/a: this backend keeps no deleted copies")
            report.add(LIFECYCLE, False, INFO, "n/a: this backend has no lifecycle "
                       "management (the sweeper is the cleanup)")
    finally:
        for name in written:  # each conditioned on the ETag the doctor reads back
            with contextlib.suppress(StoreError):
                await store.delete(name, if_etag=(await store.stat(name)).etag)
        if isinstance(store, LocalStore):  # the probes' folder, if now empty
            with contextlib.suppress(OSError):
                os.rmdir(store.root / "blobs" / PROBE_PREFIX)
    return report
