"""The S3 lifecycle configuration that deletes what the sweeper missed (a fallback).

:func:`build_s3_policy` makes, per prefix, one expiration rule per state (a filter's tags are
ANDed, so ``pending`` and ``deleting`` need a rule each) and one rule aborting incomplete
multipart uploads (S3 allows no tag filter on that action). The document is what
``aws s3api put-bucket-lifecycle-configuration --lifecycle-configuration file://...`` takes.
S3 allows at most 1,000 rules per bucket; whole days only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blobledger._base.names import check_prefix
from blobledger.errors import ConfigError
from blobledger.workers.lifecycle import STATES, check_days

MAX_RULES = 1000


def build_s3_policy(
    root: str,
    prefixes: Sequence[str],
    days: int,
    *,
    sweep_after: float | None = None,
    retag_warn_after: float | None = None,
) -> dict[str, Any]:
    """The lifecycle configuration (``{"Rules": [...]}``) for blobs under ``root`` (the
    store URL's key prefix, '' for none) and each blob-name prefix."""
    check_days(days, sweep_after=sweep_after, retag_warn_after=retag_warn_after)
    if not prefixes:
        raise ConfigError("give at least one --prefix")
    rules: list[dict[str, Any]] = []
    for prefix in prefixes:
        check_prefix(prefix.strip("/"))
        match = f"{root.strip('/') + '/' if root.strip('/') else ''}{prefix.strip('/')}/"
        for state in STATES:
            rules.append({
                "ID": f"blobledger-{state}-{prefix.strip('/')}-{days}d",
                "Status": "Enabled",
                "Filter": {"And": {"Prefix": match,
                                   "Tags": [{"Key": "state", "Value": state}]}},
                "Expiration": {"Days": days},
            })
        rules.append({
            "ID": f"blobledger-incomplete-{prefix.strip('/')}-{days}d",
            "Status": "Enabled",
            "Filter": {"Prefix": match},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": days},
        })
    if len(rules) > MAX_RULES:
        raise ConfigError(f"{len(rules)} rules: S3 takes at most {MAX_RULES} per bucket")
    return {"Rules": rules}
