"""``blobledger buckets create|list|show|change|delete`` in subprocesses: a refusal is one
readable line; deleting a bucket that holds a document is refused with exit 2 and deletes
nothing. On SQLite: what the commands decide is the command line's (their arguments, their
output, their exit status); what the database decides, each database's statements, is
tests/ledger/test_buckets.py's, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from blobledger import Ledger
from blobledger.cli import EXIT_USAGE
from tests.cli.test_exit_status import run


def test_buckets_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    env = {"BLOBLEDGER_DATABASE_URL": url, "BLOBLEDGER_STORE_URL": "file://./blobs"}
    assert run(["migrate"], tmp_path, env).returncode == 0
    (tmp_path / "blobs").mkdir(exist_ok=True)
    made = run(["buckets", "create", "photos", "--content-types", "image/*",
                "--max-object", "1KiB", "--json"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["max_object_bytes"] == 1024
    again = run(["buckets", "create", "photos"], tmp_path, env)
    assert again.returncode == 1
    assert again.stderr.strip() == ("blobledger: error: a bucket named 'photos' exists "
                                    "already")
    listed = run(["buckets", "list", "--json"], tmp_path, env)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == [
        "default", "photos"]

    async def put() -> None:
        async with Ledger.from_urls(url, f"file://{tmp_path / 'blobs'}") as ledger:
            await ledger.create("a.png", b"png", content_type="image/png",
                                bucket="photos")

    asyncio.run(put())
    shown = json.loads(run(["buckets", "show", "photos", "--json"], tmp_path, env).stdout)
    assert shown["usage"] == {"objects": 1, "bytes": 3}
    refused = run(["buckets", "delete", "photos"], tmp_path, env)
    assert refused.returncode == EXIT_USAGE
    assert refused.stderr.splitlines() == [
        "blobledger: error: bucket 'photos' holds 1 document(s): delete them first"]
    assert run(["buckets", "change", "photos", "--no-max-object", "--quota-objects", "5"],
               tmp_path, env).returncode == 0
    changed = json.loads(run(["buckets", "show", "photos", "--json"], tmp_path,
                             env).stdout)
    assert (changed["max_object_bytes"], changed["quota_objects"]) == (None, 5)
    assert changed["acl"] == "private"  # the default: nothing without a credential
    assert run(["buckets", "change", "photos", "--acl", "public-read"], tmp_path,
               env).returncode == 0
    shown = run(["buckets", "show", "photos"], tmp_path, env).stdout
    assert "acl:            public-read" in shown.splitlines()
    wrong = run(["buckets", "create", "open", "--acl", "public"], tmp_path, env)
    assert wrong.returncode == EXIT_USAGE and "public-read" in wrong.stderr
    made = run(["buckets", "create", "open", "--acl", "public-read-write", "--json"],
               tmp_path, env)
    assert json.loads(made.stdout)["acl"] == "public-read-write"
    assert run(["buckets", "delete", "open"], tmp_path, env).returncode == 0
    made = run(["buckets", "create", "empty"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    gone = run(["buckets", "delete", "empty"], tmp_path, env)
    assert gone.returncode == 0 and gone.stdout.strip() == "deleted bucket empty"
    missing = run(["buckets", "show", "empty"], tmp_path, env)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "blobledger: error: no bucket 'empty'"
