"""A pytest plugin loaded into ceph's s3-tests run (``-p tests.s3tests.plugin``): it keeps
the core groups' cases only (:data:`GROUPS`, by name; the markers of features out of their
scope deselected) and writes each case's group, outcome and first error line to the JSON
file named by ``BLOBLEDGER_S3TESTS_REPORT``."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

#: each core group of issue-free S3 and the names of its cases (ceph's own naming)
GROUPS: dict[str, str] = {
    "bucket": r"test_(bucket_(create|delete|head|notexist|recreate)|bucketv2_notexist"
              r"|buckets_|list_buckets|create_bucket|get_bucket_location)",
    "list-v1": r"test_bucket_list_",
    "list-v2": r"test_bucket_listv2_",
    "object": r"test_(object_(write|read|head|delete|raw_get|raw_put|anon_put|put_)"
              r"|put_object_(?!if)|get_object_(?!if)|delete_object(?!s)(?!_if)|object_set_get)",
    "delete-objects": r"test_(multi_object(v2)?_delete|delete_objects)",
    "ranged": r"test_ranged_",
    "conditional": r"test_(get_object_if|put_object_if|copy_object_if|delete_object_if"
                   r"|put_current_object_if|put_object_current_if)",
    "atomic": r"test_atomic_",
    "copy": r"test_(object_copy|copy_object)(?!_if)",
    "multipart": r"test_(multipart_|list_multipart|abort_multipart|non_multipart)",
}
#: markers of features outside the core groups (or of tests that fail against AWS itself)
OUT_OF_SCOPE = {"versioning", "object_lock", "encryption", "sse_s3", "bucket_policy",
                "tagging", "lifecycle", "bucket_logging", "s3website", "appendobject",
                "auth_aws2", "fails_on_aws", "storage_class", "object_ownership",
                "delete_marker", "cloud_transition", "cloud_restore", "user_policy",
                "iam_account", "iam_user", "iam_tenant", "group", "sns", "s3select"}
_COMPILED = {name: re.compile(pattern) for name, pattern in GROUPS.items()}
_ERROR = re.compile(r"An error occurred \((\w+)\) when calling the (\w+) operation")


def group_of(name: str, markers: set[str]) -> str | None:
    """The core group of a case (None: outside them all)."""
    if markers & OUT_OF_SCOPE or "versioned" in name or "version" in name:
        return None
    for group, pattern in _COMPILED.items():
        if pattern.match(name):
            return group
    return None


def reason(text: str) -> str:
    """A failure's class: the operation and S3 error code of botocore's ClientError, or
    the first line of the assertion."""
    found = _ERROR.search(text)
    if found:
        return f"{found.group(2)}: {found.group(1)}"
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:160]
    return "failed"


def _text(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(crash.message) if crash is not None else str(report.longrepr)


class Recorder:
    def __init__(self, path: str, only: set[str] | None) -> None:
        self.path = path
        self.only = only
        self.cases: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        kept, dropped = [], []
        for item in items:
            name = item.name.split("[")[0]
            group = group_of(name, {mark.name for mark in item.iter_markers()})
            if group is not None and (self.only is None or name in self.only):
                self.cases[item.nodeid] = {"name": name, "group": group,
                                           "outcome": "not run", "reason": ""}
                kept.append(item)
            else:
                dropped.append(item)
        items[:] = kept
        config.hook.pytest_deselected(items=dropped)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        case = self.cases.get(report.nodeid)
        if case is None:
            return
        if report.failed and report.when == "teardown":  # the case's own outcome stands
            case["teardown"] = reason(_text(report))
        elif report.failed:
            case["outcome"] = "failed"
            if not case["reason"]:
                case["reason"] = reason(_text(report)) + (" (in set-up)"
                                                         if report.when == "setup" else "")
        elif report.skipped and case["outcome"] == "not run":
            case["outcome"] = "skipped"
        elif report.when == "call" and report.passed and case["outcome"] == "not run":
            case["outcome"] = "passed"

    def pytest_sessionfinish(self) -> None:
        with open(self.path, "w", encoding="utf-8") as out:
            json.dump(list(self.cases.values()), out, indent=1)


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("BLOBLEDGER_S3TESTS_REPORT")
    if path:
        only = os.environ.get("BLOBLEDGER_S3TESTS_ONLY")
        config.pluginmanager.register(
            Recorder(path, set(only.split(",")) if only else None), "blobledger-s3tests")
