"""``scripts/mutate`` finds the guards of the real sources, of every kind, and decides a
mutant end to end against a tiny test selection."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.mutate.argued import ARGUED
from tests.mutate.mutants import KINDS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutate"
#: guards a test must kill (tests/ledger/test_guards.py): each must be enumerated
KNOWN = ["where:transitions:_commit_blob:blobs.attempt",
         "where:transitions:_abandon:blobs.attempt",
         "where:transitions:remove_swept:blobs.attempt",
         "where:transitions:_record_parts:uploads.offset",
         "recheck:reconciler:delete_orphan:ignored"]


def mutate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)


def test_lists_mutants_of_every_kind_from_the_sources() -> None:
    done = mutate("--list", "--json")
    assert done.returncode == 0, done.stderr
    mutants = json.loads(done.stdout)
    kinds = {m["kind"] for m in mutants}
    assert kinds == set(KINDS), kinds
    ids = [m["id"] for m in mutants]
    assert len(ids) == len(set(ids)), "mutant ids are unique"
    assert set(KNOWN) <= set(ids), set(KNOWN) - set(ids)
    assert set(ARGUED) <= set(ids), f"argued but not enumerated: {set(ARGUED) - set(ids)}"
    paths = {m["path"] for m in mutants}
    assert {"blobledger/stores/local.py", "blobledger/stores/azure/store.py",
            "blobledger/stores/s3/store.py", "blobledger/workers/reconciler.py"} <= paths
    assert all(m["tests"] for m in mutants), "every mutant has tests to run"


def test_a_mutant_is_killed_in_a_copy_and_the_tree_left_alone() -> None:
    source = (ROOT / "src/blobledger/protocol/transitions.py").read_bytes()
    done = mutate("--only", "rowcount:transitions:confirm:won", "--json", "--tests",
                  "tests/ledger/test_fencing.py -k 'sqlite-local and swept_intent'")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(m["id"], m["status"]) for m in report["mutants"]] == [
        ("rowcount:transitions:confirm:won", "killed")], report
    assert "swept_intent" in report["mutants"][0]["test"]
    assert (ROOT / "src/blobledger/protocol/transitions.py").read_bytes() == source
