"""``scripts/mutate`` finds the guards of the real sources, of every kind, and decides a
mutant end to end against a tiny test selection; every guard-shaped piece of code under
``src/`` is one it enumerates, or is named as no fence with the reason."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

from tests.mutate.argued import ARGUED, PENDING
from tests.mutate.mutants import KINDS, NOT_FENCES, REGISTRY, enumerate_mutants
from tests.mutate.shapes import sites, unenumerated

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutate"
#: guards a test must kill (tests/ledger/test_guards.py): each must be enumerated
KNOWN = ["where:transitions:_commit_blob:blobs.attempt",
         "where:transitions:_abandon:blobs.attempt",
         "where:transitions:remove_swept:blobs.attempt",
         "where:transitions:_record_parts:uploads.offset",
         "recheck:reconciler:delete_orphan:ignored",
         # the workers' claims and marks, the stores' create-only completions, the disk's lock
         "where:events:_delivered:events.attempt", "where:events:_failed:events.attempt",
         "where:events:_dead:events.attempt", "read:events:_due:events.lease_until",
         "where:events:_claim:events.lease_until", "retag:retagger:_retag:judged-committed",
         "store:stores/azure/store:commit_staged:commit_block_list-without-unpacked",
         "store:stores/s3/store:commit_staged:complete_multipart_upload-without-IfNoneMatch",
         "store:stores/local:_locked:without-flock"]
SRC = ROOT / "src"


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
    assert set(PENDING) <= set(ids), f"pending but not enumerated: {set(PENDING) - set(ids)}"
    assert not set(PENDING) & set(ARGUED), "a survivor is argued harmless or pending, not both"
    paths = {m["path"] for m in mutants}
    assert {path for path, _ in REGISTRY} == paths, "each registered module has a guard"
    assert all(m["tests"] for m in mutants), "every mutant has tests to run"


def test_a_mutant_is_killed_in_a_copy_and_the_tree_left_alone() -> None:
    source = (ROOT / "src/blobledger/protocol/transitions/documents.py").read_bytes()
    done = mutate("--only", "rowcount:transitions:confirm:won", "--json", "--tests",
                  "tests/ledger/test_fencing.py -k 'sqlite-local and swept_intent'")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(m["id"], m["status"]) for m in report["mutants"]] == [
        ("rowcount:transitions:confirm:won", "killed")], report
    assert "swept_intent" in report["mutants"][0]["test"]
    assert (ROOT / "src/blobledger/protocol/transitions/documents.py").read_bytes() == source


def test_every_guard_shaped_site_is_enumerated_or_named_as_no_fence() -> None:
    missing = unenumerated(SRC)
    assert not missing, "guard-shaped code no mutant covers: enumerate it (tests/mutate/" \
        "mutants.py REGISTRY) or name it in NOT_FENCES with the reason:\n" + "\n".join(
            f"{s.key} (line {s.line}): {s.text}" for s in missing)


def test_each_reason_names_code_that_exists() -> None:
    found = {(s.path, s.context) for s in sites(SRC)}
    for key, reason in NOT_FENCES.items():
        assert len(reason) > 40, f"{key}: a reason, not a label"
        path, _, rest = key.partition(":")
        assert (SRC / path).is_file(), key
        if rest:
            context = rest.split(":")[0]
            names = {n.name for n in ast.walk(ast.parse((SRC / path).read_text()))
                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)} | {
                c for p, c in found if p == path}
            assert context in names, f"{key}: no {context} in {path}"


def test_a_fence_built_beside_the_registry_is_caught(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    assert unenumerated(copy) == []
    (copy / "blobledger/protocol/sideways.py").write_text(
        "from sqlalchemy import update\n"
        "from blobledger.protocol.transitions import NOW, blobs\n\n"
        "_steal = update(blobs).where(blobs.c.name == 'x', blobs.c.lease_until < NOW)\n\n\n"
        "async def drop(store, name):\n"
        "    await store.set_tags(name, {}, if_tags={'state': 'pending'})\n")
    found = {(s.path, s.shape) for s in unenumerated(copy)}
    assert found == {("blobledger/protocol/sideways.py", "where"),
                     ("blobledger/protocol/sideways.py", "clock"),
                     ("blobledger/protocol/sideways.py", "condition")}, found
    assert not any(m.path.endswith("sideways.py") for m in enumerate_mutants(copy, check=False))
