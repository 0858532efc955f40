"""What ``blobledger doctor`` adds for an S3 bucket: versioning and the lifecycle rule, read
from the bucket's own configuration (unlike Azure's, readable with the data credentials).

Versioning matters because a delete on a versioned bucket leaves the bytes as a noncurrent
version behind a delete marker: blobledger's deletes remove what readers see, and the
bucket's own noncurrent-version expiration decides when the bytes are gone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from blobledger.errors import StoreError
from blobledger.stores.base import Store
from blobledger.stores.s3 import S3Store, map_errors
from blobledger.workers.doctor.checks import (
    FAIL,
    INFO,
    LIFECYCLE,
    PASS,
    SOFT_DELETE,
    UNKNOWN,
    Report,
)
from blobledger.workers.lifecycle import RETAG_FACTOR

VERSIONING = SOFT_DELETE  # the same question: are deleted bytes kept?


def s3_extras(store: Store, retag_warn_after: float | None = None
              ) -> Callable[[Report], Awaitable[None]]:
    assert isinstance(store, S3Store)

    async def extras(report: Report) -> None:
        s3 = await store._client()
        try:
            with map_errors(store.bucket):
                status = (await s3.get_bucket_versioning(Bucket=store.bucket)).get("Status")
            if status == "Enabled":
                report.add(VERSIONING, False, INFO, "versioning on: a delete leaves the bytes "
                           "as a noncurrent version; expire noncurrent versions to free them")
            elif status == "Suspended":
                report.add(VERSIONING, False, INFO, "versioning suspended: earlier versions "
                           "stay until expired")
            else:
                report.add(VERSIONING, False, INFO, "versioning off: a delete removes the "
                           "bytes")
        except StoreError as exc:
            report.add(VERSIONING, False, UNKNOWN, f"not readable: {exc}")
        report.add(*_lifecycle(await _rules(s3, store.bucket), retag_warn_after))

    return extras


async def _rules(s3: Any, bucket: str) -> list[dict[str, Any]] | StoreError:
    try:
        with map_errors(bucket):
            answer = await s3.get_bucket_lifecycle_configuration(Bucket=bucket)
        return list(answer.get("Rules", []))
    except StoreError as exc:
        if "NoSuchLifecycleConfiguration" in str(exc) or "404" in str(exc):
            return []
        return exc


def _lifecycle(rules: list[dict[str, Any]] | StoreError,
               retag_warn_after: float | None = None) -> tuple[str, bool, str, str]:
    if isinstance(rules, StoreError):
        return LIFECYCLE, False, UNKNOWN, f"not readable: {rules}"
    ours = [r.get("ID", "") for r in rules if str(r.get("ID", "")).startswith("blobledger-")]
    if retag_warn_after is not None:
        near = sorted(str(r.get("ID", "")) for r in rules
                      if str(r.get("ID", "")).startswith("blobledger-")
                      and "Days" in r.get("Expiration", {})
                      and int(r["Expiration"]["Days"]) * 86400 < RETAG_FACTOR * retag_warn_after)
        if near:  # a must-have with the deferred retag: the rule would delete live bytes
            return (LIFECYCLE, True, FAIL, f"rules {', '.join(near)} expire blobs sooner "
                    f"than {RETAG_FACTOR} times BLOBLEDGER_RETAG_WARN_AFTER: a ready "
                    "document's blob still owing its retag (tagged pending) could be deleted "
                    "(print a longer rule with `blobledger lifecycle-policy`)")
    if ours:
        return LIFECYCLE, False, PASS, f"rules present: {', '.join(sorted(ours))}"
    return (LIFECYCLE, False, INFO, "no blobledger rule: compare with "
            "`blobledger lifecycle-policy` (a fallback, never the cleanup)")
