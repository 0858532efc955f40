"""The Azure lifecycle management policy that deletes what the sweeper missed (a fallback).

:func:`build_policy` makes one rule per state (``state == pending``, ``state == deleting``:
conditions in one rule are ANDed, so an OR needs two rules) deleting block blobs under the
given prefixes N days after their last modification. :func:`validate_policy` checks a policy
against the service's limits: whole days >= 1, equality matches only, at most 10 blob index
conditions and 10 prefixes per rule, and a flat namespace (blob index tags, and so these
filters, do not exist on accounts with a hierarchical namespace).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from blobledger._base.names import check_prefix
from blobledger.errors import ConfigError
from blobledger.workers.lifecycle import STATES, check_days

MAX_PREFIXES = 10
MAX_TAG_CONDITIONS = 10
NOTE = ("this rule is a fallback for what the sweeper missed, never the cleanup: run "
        "`blobledger sweep`; blob index filters need a flat-namespace account")
_CONTAINER = re.compile(r"^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$")


def build_policy(
    container: str,
    prefixes: Sequence[str],
    days: int,
    *,
    states: Sequence[str] = STATES,
    hierarchical_namespace: bool = False,
    sweep_after: float | None = None,
    retag_warn_after: float | None = None,
) -> dict[str, Any]:
    """The policy document (``{"rules": [...]}``), validated.

    With ``sweep_after`` (seconds), N days must exceed it: the rule must never race an
    upload that the sweeper itself would still leave alone.
    """
    check_days(days, sweep_after=sweep_after, retag_warn_after=retag_warn_after)
    if hierarchical_namespace:
        raise ConfigError("lifecycle blob index filters need a flat namespace; this account "
                          "has a hierarchical namespace")
    if not _CONTAINER.match(container):
        raise ConfigError(f"container name {container!r} is not a valid Azure container name")
    if not prefixes:
        raise ConfigError("give at least one --prefix")
    if len(prefixes) > MAX_PREFIXES:
        raise ConfigError(f"{len(prefixes)} prefixes: a lifecycle rule takes at most "
                          f"{MAX_PREFIXES}")
    matches = []
    for prefix in prefixes:
        check_prefix(prefix.strip("/"))
        matches.append(f"{container}/{prefix.strip('/')}/")
    rules = [
        {
            "enabled": True,
            "name": f"blobledger-{state}-{days}d",
            "type": "Lifecycle",
            "definition": {
                "actions": {"baseBlob": {"delete": {"daysAfterModificationGreaterThan": days}}},
                "filters": {
                    "blobTypes": ["blockBlob"],
                    "prefixMatch": matches,
                    "blobIndexMatch": [{"name": "state", "op": "==", "value": state}],
                },
            },
        }
        for state in states
    ]
    policy = {"rules": rules}
    validate_policy(policy)
    return policy


def validate_policy(policy: Mapping[str, Any]) -> None:
    """Raise ConfigError unless every rule respects the service's limits."""
    rules = policy.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ConfigError("a lifecycle policy needs at least one rule")
    for rule in rules:
        name = rule.get("name", "?")
        definition = rule.get("definition", {})
        filters = definition.get("filters", {})
        prefixes = filters.get("prefixMatch", [])
        if len(prefixes) > MAX_PREFIXES:
            raise ConfigError(f"rule {name}: {len(prefixes)} prefixes, at most {MAX_PREFIXES}")
        conditions = filters.get("blobIndexMatch", [])
        if len(conditions) > MAX_TAG_CONDITIONS:
            raise ConfigError(f"rule {name}: {len(conditions)} blob index conditions, at "
                              f"most {MAX_TAG_CONDITIONS}")
        for condition in conditions:
            if condition.get("op") != "==":
                raise ConfigError(f"rule {name}: only equality (==) matches are used, not "
                                  f"{condition.get('op')!r}")
        delete = definition.get("actions", {}).get("baseBlob", {}).get("delete", {})
        for key, days in delete.items():
            if not isinstance(days, int) or isinstance(days, bool) or days < 1:
                raise ConfigError(f"rule {name}: {key} must be whole days >= 1, not {days!r}")
