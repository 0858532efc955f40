"""The s3-tests harness itself: which of ceph's cases make up each core group, how a
failure is classed, how the figures are tabled, and the configuration a run writes. The
run against real servers is ``scripts/s3-tests`` (docs/s3.md records its figures); with
ceph's s3-tests at hand (``BLOBLEDGER_S3TESTS_DIR`` or ``BLOBLEDGER_S3TESTS_GIT``) a short
form runs a few of its cases against moto's server and the endpoint."""

from __future__ import annotations

import configparser
import os
from pathlib import Path

import pytest

from tests.s3tests.harness import USERS, Target, _config, checkout, run, started, table
from tests.s3tests.plugin import group_of, reason


@pytest.mark.parametrize(("name", "markers", "group"), [
    ("test_bucket_create_naming_good_long_63", set(), "bucket"),
    ("test_bucket_list_delimiter_basic", {"list_objects_v2"}, "list-v1"),
    ("test_bucket_listv2_delimiter_basic", {"list_objects_v2"}, "list-v2"),
    ("test_object_write_read_update_read_delete", set(), "object"),
    ("test_multi_object_delete", set(), "delete-objects"),
    ("test_ranged_request_response_code", set(), "ranged"),
    ("test_put_object_ifmatch_good", set(), "conditional"),
    ("test_get_object_ifnonematch_good", set(), "conditional"),
    ("test_atomic_dual_write_1mb", set(), "atomic"),
    ("test_object_copy_same_bucket", set(), "copy"),
    ("test_multipart_upload_small", set(), "multipart"),
    ("test_bucket_list_return_data_versioning", set(), None),
    ("test_object_copy_versioned_bucket", {"versioning"}, None),
    ("test_object_lock_put_obj_lock", {"object_lock"}, None),
    ("test_bucket_policy_another_bucket", {"bucket_policy"}, None),
    ("test_post_object_anonymous_request", set(), None),
])
def test_the_core_groups(name: str, markers: set[str], group: str | None) -> None:
    assert group_of(name, markers) == group


def test_a_failure_is_classed_by_its_operation_and_code() -> None:
    text = ("botocore.exceptions.ClientError: An error occurred (NotImplemented) when "
            "calling the CreateBucket operation: buckets other than ...")
    assert reason(text) == "CreateBucket: NotImplemented"
    assert reason("\nassert 404 == 200\nmore") == "assert 404 == 200"


def test_the_table_gives_each_group_its_share() -> None:
    cases = [{"group": "ranged", "outcome": "passed"}, {"group": "ranged", "outcome": "failed"},
             {"group": "copy", "outcome": "passed"}]
    text = table({"moto": cases})
    assert "| ranged | 1/1/2 (50 %) |" in text and "| copy | 1/0/1 (100 %) |" in text
    assert "| all | 2/1/3 (67 %) |" in text and "| multipart | 0/0/0 (-) |" in text


def test_the_configuration_names_every_user(tmp_path: Path) -> None:
    parsed = configparser.RawConfigParser()
    parsed.read(_config(Target("sqlite-local", "localhost", 8000), tmp_path))
    assert parsed.get("DEFAULT", "port") == "8000"
    assert not parsed.getboolean("DEFAULT", "is_secure")
    for role, section in [("main", "s3 main"), ("alt", "s3 alt"), ("tenant", "s3 tenant")]:
        assert parsed.get(section, "access_key") == USERS[role][0]
        assert parsed.get(section, "secret_key") == USERS[role][1]


SHORT = ["test_bucket_list_empty", "test_object_write_read_update_read_delete"]


@pytest.mark.slow
@pytest.mark.skipif(not (os.environ.get("BLOBLEDGER_S3TESTS_DIR")
                         or os.environ.get("BLOBLEDGER_S3TESTS_GIT")),
                    reason="ceph's s3-tests is not at hand: set BLOBLEDGER_S3TESTS_DIR (a "
                           "checkout) or BLOBLEDGER_S3TESTS_GIT (a git repository)")
def test_the_short_form(tmp_path: Path) -> None:
    """Two of ceph's cases against moto's server, which passes them (the harness reads a
    pass), and against the endpoint, where each bucket is a new one and CreateBucket of a
    second bucket comes with buckets as namespaces (the harness reads that failure)."""
    with checkout() as tests:
        with started("moto", tmp_path) as moto:
            peer = run(moto, tests, tmp_path, SHORT)
        with started("sqlite-local", tmp_path) as ours:
            endpoint = run(ours, tests, tmp_path, SHORT)
    assert sorted((c["name"], c["outcome"]) for c in peer) == [(n, "passed") for n in SHORT]
    assert {c["name"] for c in endpoint} == set(SHORT)
    assert all(c["outcome"] == "passed" or c["reason"] == "CreateBucket: NotImplemented"
               for c in endpoint), endpoint
