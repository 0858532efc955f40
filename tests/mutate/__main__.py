"""``python -m tests.mutate`` (``scripts/mutate``): mutation testing of the fences.

Each mutant (:mod:`tests.mutate.mutants`) is applied to a temporary copy of ``src/``; the
tests relevant to it run against that copy (``PYTHONPATH`` puts it first, and every
subprocess a test starts, a real ``serve`` or a crash child, inherits it), in one process,
stopping at the first failure. A mutant is *killed* if a test fails, *survived* if all
pass, *error* if pytest could not run them (or they ran past ``--timeout``). The working
tree is never touched. Prints one line per mutant, then the score (killed out of killed and
survived); ``--json`` prints the same as one JSON document.

``--record`` writes docs/mutation.md from the results of this run laid over the earlier
ones: those the record itself holds (each mutant's status, and the test that killed it, read
back from its tables; ``--fresh`` leaves them out), then those of ``--from`` files (a later
file's wins), then this run's. A mutant no longer enumerated drops out of the record.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from tests.mutate.argued import ARGUED, PENDING
from tests.mutate.mutants import Mutant, enumerate_mutants

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
MUTATION_DOC = ROOT / "docs" / "mutation.md"
CRASH_MATRIX_DOC = ROOT / "docs" / "crash-matrix.md"

GUARDS = ["tests/ledger/test_guards.py"]
RETAG = ["tests/ledger/test_deferred_retag.py"]
LEDGER = [*GUARDS, "tests/ledger/test_fencing.py", "tests/ledger/test_ledger.py", *RETAG]
SWEEP = ["tests/sweeper/test_sweeper.py", "tests/sweeper/test_reconciler.py"]
UPLOADS = ["tests/api/test_direct.py", "tests/api/test_tus.py"]
ATTACH = ["tests/attachments/test_attach.py", "tests/attachments/test_uploads.py",
          "tests/attachments/test_pause.py"]
#: which tests are relevant to a mutant: the first pattern matching its id, in this order
RELEVANT: list[tuple[str, list[str]]] = [
    (r":direct_put:", ["tests/api/test_direct.py", "tests/stores/test_s3.py",
                       "tests/stores/test_azure.py"]),
    (r":stores/local:", ["tests/stores/test_local.py", *GUARDS, "tests/ledger/test_fencing.py",
                         "tests/sweeper/test_sweeper.py"]),
    (r":stores/azure/", ["tests/stores/test_azure.py", "tests/stores/test_azure_lean.py",
                         *GUARDS, "tests/ledger/test_fencing.py",
                         "tests/sweeper/test_sweeper.py"]),
    (r":stores/s3/", ["tests/stores/test_s3.py", *GUARDS, "tests/ledger/test_fencing.py",
                      "tests/sweeper/test_sweeper.py"]),
    (r":reconciler:", [*GUARDS, "tests/sweeper/test_reconciler.py",
                       "tests/workers/test_reconcile_retag.py"]),
    (r":single:", [*RETAG, "tests/crash/test_single_statements.py", *GUARDS]),
    (r"^group:", ["tests/crash/test_group_commit.py"]),
    (r"^cleanup:s3api/", ["tests/s3api/test_swept_completion.py"]),
    (r"^cleanup:resumable:", ["tests/crash/test_faults.py",
                              "tests/api/test_tus_swept_completion.py"]),
    (r"^cleanup:", [*GUARDS, *RETAG, "tests/ledger/test_fencing.py", *SWEEP]),
    (r":buckets:", ["tests/ledger/test_buckets.py"]),
    (r":events:", ["tests/events/test_marks.py", "tests/events/test_events.py"]),
    (r":grace:", ["tests/attachments/test_grace.py", "tests/dj/test_grace.py"]),
    (r":held:", ["tests/held/test_held.py", "tests/held/test_held_steps.py",
                 "tests/held/test_processors.py",
                 "tests/api/test_pipeline_routes.py"]),
    (r":variant_steps:|:variant_owner:|:variants/", [
        "tests/variants/test_variants.py", "tests/variants/test_variant_steps.py",
        "tests/variants/test_pause.py"]),
    (r":owners:", ["tests/sweeper/test_sweeper.py", "tests/attachments/test_attach.py"]),
    (r":ledger:", [*GUARDS, "tests/ledger/test_fencing.py", "tests/ledger/test_ledger.py"]),
    (r":sweeper:", [*SWEEP, *GUARDS, "tests/attachments/test_attach.py"]),
    (r":sqlalchemy:", ATTACH),
    (r":django/", ["tests/dj/test_attach.py", "tests/dj/test_pause.py", "tests/dj/test_kill.py",
                   "tests/dj/test_storage.py"]),
    (r":s3api/rows:", ["tests/s3api/test_s3rows.py", "tests/s3api/test_acl.py",
                       "tests/s3api/test_shapes.py"]),
    (r"^condition:resumable:", ["tests/crash/test_db_faults.py",
                                "tests/crash/test_abort_race.py"]),
    (r"^condition:s3api/", ["tests/s3api/test_raced_conditions.py",
                            "tests/s3api/test_writes.py", "tests/s3api/test_multipart.py",
                            "tests/s3api/test_reads.py", "tests/s3api/test_objects.py",
                            "tests/s3api/test_chunked.py"]),
    (r":s3api/", ["tests/s3api/test_auth.py"]),
    (r":api/links:", ["tests/api/test_signed_reads.py", "tests/api/test_download_links.py"]),
    (r":config:", ["tests/test_config.py", "tests/events/test_settings.py",
                   "tests/api/test_signed_reads.py", "tests/held/test_api.py",
                   "tests/dj/test_storage.py"]),
    (r"retag", [*RETAG, *GUARDS]),
    (r"_open_uploads|_reserved_names", ["tests/ledger/test_quotas.py", *GUARDS, *UPLOADS]),
    (r"upload|record_|handle|verified|_finish", [*GUARDS, *UPLOADS, *SWEEP]),
    (r"column_blobs", ["tests/dj/test_stale.py", "tests/dj/test_attach.py"]),
    (r":pointed_blob:", ["tests/api/test_signed_reads.py", "tests/ledger/test_ledger.py",
                         "tests/hostile/test_reads.py"]),
    (r":pointed_at:", [*GUARDS, *SWEEP, *ATTACH, "tests/dj/test_attach.py"]),
    (r"attach|stage|owned|detach", [*GUARDS, *ATTACH]),
    (r"claim|swept|roll_forward|hand_to|pointed|remove_deleted|purge|to_deleting",
     [*GUARDS, "tests/ledger/test_fencing.py", *SWEEP, "tests/ledger/test_ledger.py"]),
    (r"", [*LEDGER, *SWEEP, *UPLOADS]),
]
PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "-n", "0"]
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    status: str  # killed | survived | error
    seconds: float
    test: str | None = None  # the test that killed it
    detail: str = ""

    def line(self) -> str:
        what = self.test or self.detail
        if self.status == "survived" and self.mutant.id in ARGUED:
            what = "(argued harmless)"
        elif self.status == "survived" and self.mutant.id in PENDING:
            what = "(killing test pending)"
        return f"{self.status:<8} {self.mutant.id}  {self.seconds:.0f}s  {what}".rstrip()

    def as_dict(self) -> dict[str, object]:
        return {**self.mutant.as_dict(), "status": self.status,
                "seconds": round(self.seconds, 1), "test": self.test, "detail": self.detail}


def relevant(mutant: Mutant) -> list[str]:
    for pattern, tests in RELEVANT:
        if re.search(pattern, mutant.id):
            return [t for t in dict.fromkeys(tests) if (ROOT / t).exists()]
    raise AssertionError("the last pattern matches every mutant")


def mutated_tree(mutant: Mutant, folder: Path) -> Path:
    """A copy of ``src/`` under ``folder`` with the mutant applied; returns the copy."""
    copy = folder / "src"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = copy / mutant.path
    target.write_bytes(mutant.apply(target.read_bytes()))
    return copy


def environment(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(copy), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def imports_copy(copy: Path, env: dict[str, str]) -> bool:
    """Whether a process started with ``env`` imports blobledger from the copy."""
    done = subprocess.run(
        [sys.executable, "-c", "import blobledger; print(blobledger.__file__)"], env=env,
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode == 0 and Path(done.stdout.strip()).is_relative_to(copy)


def run_mutant(mutant: Mutant, tests: Sequence[str], extra: Sequence[str],
               timeout: float) -> Result:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="blobledger-mutant-") as folder:
        copy = mutated_tree(mutant, Path(folder))
        env = environment(copy)
        if not imports_copy(copy, env):
            return Result(mutant, "error", time.monotonic() - started,
                          detail="the copy is not what a test process imports")
        command = [sys.executable, "-m", "pytest", *PYTEST, *extra, *tests]
        try:
            done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout, check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            return Result(mutant, "error", time.monotonic() - started,
                          detail=f"timed out after {timeout:.0f}s")
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    if done.returncode == 0:
        return Result(mutant, "survived", seconds)
    found = FAILED.search(output)
    if done.returncode == 1:
        return Result(mutant, "killed", seconds, test=found.group(1) if found else None)
    tail = " | ".join(output.strip().splitlines()[-3:])
    return Result(mutant, "error", seconds, detail=f"pytest exit {done.returncode}: {tail}")


def chosen(mutants: Iterable[Mutant], patterns: Sequence[str]) -> list[Mutant]:
    """Mutants whose id matches one of the patterns (a glob, or a substring)."""
    if not patterns:
        return list(mutants)
    return [m for m in mutants
            if any(fnmatch.fnmatchcase(m.id, p) or p in m.id for p in patterns)]


def score(results: Sequence[Result]) -> dict[str, object]:
    counts = {s: sum(r.status == s for r in results) for s in ("killed", "survived", "error")}
    decided = counts["killed"] + counts["survived"]
    return {**counts, "total": len(results),
            "score": round(counts["killed"] / decided, 3) if decided else None}


def score_line(results: Sequence[Result]) -> str:
    total = score(results)
    percent = "n/a" if total["score"] is None else f"{100 * float(str(total['score'])):.1f}%"
    argued = sum(r.status == "survived" and r.mutant.id in ARGUED for r in results)
    return (f"score {percent}: {total['killed']} killed, {total['survived']} survived "
            f"({argued} argued harmless), {total['error']} error, of {total['total']}")


def markdown(results: Sequence[Result], selection: str, enumerated: Sequence[Mutant]) -> str:
    """The section ``Mutation score`` (docs/mutation.md, appended to the crash matrix)."""
    ordered = sorted(results, key=lambda r: (r.status != "survived", r.mutant.id))
    survived = [r for r in ordered if r.status == "survived"]
    lines = [
        "## Mutation score", "",
        "Generated by `scripts/mutate --record` (do not edit by hand): each guard of the",
        "fences in the modules `tests/mutate/mutants.py` registers (a compare-and-set",
        "condition, a claim's or mark's terms, a rowcount check, a lease or age comparison,",
        "a store's create-only, delete or tag condition and the local disk's lock, a",
        "worker's conditioned retag, a re-check before a delete, an integration's attach or",
        "detach, a settings safety check, a condition the S3 endpoint checks before a",
        "write, group commit's per-run decisions) was weakened on its own, or a clean-up",
        "of bytes published after their row went (a lost writer's, the sweeper's late",
        "delete) skipped, in a copy of the sources",
        "and the tests relevant to it were run against it; a guard-shaped piece of code",
        "outside the registry fails `tests/mutate/test_mutants.py` unless named there as no",
        f"fence, with the reason ({selection}).", "",
        f"Run: {datetime.now(UTC):%Y-%m-%d}. {score_line(results).capitalize()}.", "",
    ]
    if len(results) < len(enumerated):
        ran = {r.mutant.id for r in results}
        left: dict[str, int] = {}
        for mutant in enumerated:
            if mutant.id not in ran:
                left[mutant.path] = left.get(mutant.path, 0) + 1
        lines += [f"{len(results)} of the {len(enumerated)} mutants `scripts/mutate --list` "
                  "enumerates were run for this record; the others are not counted. Not run "
                  "yet (`scripts/mutate --only` them, then `--record`): "
                  + ", ".join(f"{count} in {path}" for path, count in left.items()) + ".", ""]
    if survived:
        lines += ["Survivors (no test failed with the guard weakened), and why each may be",
                  "harmless (`tests/mutate/argued.py`; none: it needs a test):", "",
                  "| mutant | line | weakened | why harmless |", "| --- | --- | --- | --- |"]
        lines += [f"| `{r.mutant.id}` | {r.mutant.path}:{r.mutant.line} | "
                  f"{_cell(r.mutant.description)} | {_cell(_why(r.mutant.id))} |"
                  for r in survived]
        lines.append("")
    errors = [r for r in ordered if r.status == "error"]
    if errors:
        lines += ["Not decided (pytest did not run to the end):", ""]
        lines += [f"- `{r.mutant.id}`: {r.detail}" for r in errors]
        lines.append("")
    killed = [r for r in ordered if r.status == "killed"]
    if killed:
        lines += ["<details><summary>Killed, and by which test</summary>", "",
                  "| mutant | killed by |", "| --- | --- |"]
        lines += [f"| `{r.mutant.id}` | `{r.test or '?'}` |" for r in killed]
        lines += ["", "</details>", ""]
    return "\n".join(lines)


RECORDED = re.compile(r"^\| `(?P<id>[^`]+)` \| (?:`(?P<test>[^`]*)` \||[^|]*\| [^|]*\|)",
                      re.MULTILINE)
UNDECIDED = re.compile(r"^- `(?P<id>[^`]+)`: (?P<detail>.*)$", re.MULTILINE)


def recorded(mutants: Sequence[Mutant], text: str) -> list[Result]:
    """The results a record (docs/mutation.md) holds for these mutants: the survivors' and
    the killed tables, and the list of undecided ones (their seconds are not recorded)."""
    found: dict[str, Result] = {}
    by_id = {m.id: m for m in mutants}
    survivors, _, rest = text.partition("<details><summary>Killed")
    for match in RECORDED.finditer(survivors):
        if match["id"] in by_id and match["test"] is None:
            found[match["id"]] = Result(by_id[match["id"]], "survived", 0.0)
    for match in UNDECIDED.finditer(survivors):
        if match["id"] in by_id:
            found[match["id"]] = Result(by_id[match["id"]], "error", 0.0,
                                        detail=match["detail"])
    for match in RECORDED.finditer(rest):
        if match["id"] in by_id and match["test"] is not None:
            test = None if match["test"] == "?" else match["test"]
            found[match["id"]] = Result(by_id[match["id"]], "killed", 0.0, test=test)
    return [found[m.id] for m in mutants if m.id in found]


def merged(mutants: Sequence[Mutant], *layers: Sequence[Result]) -> list[Result]:
    """One result per mutant: a later layer's wins; in the mutants' order."""
    found: dict[str, Result] = {}
    for layer in layers:
        found.update((r.mutant.id, r) for r in layer)
    return [found[m.id] for m in mutants if m.id in found]


def _why(mutant_id: str) -> str:
    if mutant_id in ARGUED:
        return ARGUED[mutant_id]
    if mutant_id in PENDING:
        return f"none: killing test pending ({PENDING[mutant_id]})"
    return "none"


def _cell(text: str) -> str:
    return text.replace("|", "/")


def record(results: Sequence[Result], selection: str, enumerated: Sequence[Mutant]) -> None:
    """docs/mutation.md, and the same section at the end of docs/crash-matrix.md."""
    from tests.crash.matrix_doc import with_mutation_section

    text = markdown(results, selection, enumerated)
    MUTATION_DOC.write_text(text)
    if CRASH_MATRIX_DOC.exists():
        CRASH_MATRIX_DOC.write_text(with_mutation_section(CRASH_MATRIX_DOC.read_text(), text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print the mutants and stop")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="mutants whose id matches (a glob or a substring; repeatable)")
    parser.add_argument("--tests", default=None, metavar="PYTEST ARGS",
                        help="the tests for every mutant (default: those relevant to it)")
    parser.add_argument("--pytest", default="", metavar="ARGS",
                        help="more pytest arguments for each run (e.g. \"-k 'sqlite'\")")
    parser.add_argument("--jobs", type=int, default=1, help="mutants at once (default 1)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per mutant (default 900)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    parser.add_argument("--record", action="store_true",
                        help="write docs/mutation.md and its section in docs/crash-matrix.md")
    parser.add_argument("--log", default=None, metavar="JSONL",
                        help="append each result to this file as it comes (one JSON a line)")
    parser.add_argument("--from", dest="saved", action="append", default=[], metavar="JSON",
                        help="results of earlier --json or --log runs instead of running "
                             "(repeatable; a later file's result for a mutant wins)")
    parser.add_argument("--fresh", action="store_true",
                        help="--record only this run's and --from results, not the record's")
    parser.add_argument("--selection", default=None,
                        help="how the tests were chosen, for --record (default: from the "
                             "options)")
    args = parser.parse_args(argv)
    mutants = chosen(enumerate_mutants(SRC), args.only)
    if args.list:
        if args.json:
            print(json.dumps([m.as_dict() | {"tests": relevant(m)} for m in mutants], indent=1))
        else:
            for m in mutants:
                print(f"{m.id}  {m.path}:{m.line}  {m.description}")
        return 0
    out = sys.stderr if args.json else sys.stdout
    if args.saved:
        results = saved(mutants, args.saved)
        for result in results:
            print(result.line(), file=out)
    else:
        results = run_all(mutants, args, out)
    print(score_line(results), file=out, flush=True)
    if args.json:
        print(json.dumps({"mutants": [r.as_dict() for r in results], **score(results)},
                         indent=1))
    if args.record:
        selection = args.selection or (
            (f"`{args.tests}`" if args.tests is not None
             else "the test files `scripts/mutate` maps to it")
            + (f", with `{args.pytest}`" if args.pytest else ""))
        everything = enumerate_mutants(SRC)
        earlier = [] if args.fresh or not MUTATION_DOC.exists() else recorded(
            everything, MUTATION_DOC.read_text())
        if args.saved:
            earlier = merged(everything, earlier, saved(everything, args.saved))
        record(merged(everything, earlier, results), selection, everything)
    return 0


def run_all(mutants: Sequence[Mutant], args: argparse.Namespace, out: TextIO) -> list[Result]:
    extra = shlex.split(args.pytest)
    given = shlex.split(args.tests) if args.tests is not None else None
    results: list[Result] = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_mutant, m, given or relevant(m), extra, args.timeout)
                   for m in mutants]
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            print(result.line(), file=out, flush=True)
            if args.log:
                with open(args.log, "a") as log:
                    log.write(json.dumps(result.as_dict()) + "\n")
    return sorted(results, key=lambda r: mutants.index(r.mutant))


def _results_in(text: str) -> list[dict[str, object]]:
    """The results in a ``--json`` document or a ``--log`` file (one result a line)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return list(document["mutants"]) if "mutants" in document else [document]


def saved(mutants: Sequence[Mutant], files: Sequence[str]) -> list[Result]:
    """The results that earlier ``--json`` runs recorded for these mutants."""
    found: dict[str, dict[str, object]] = {}
    for file in files:
        for item in _results_in(Path(file).read_text()):
            found[str(item["id"])] = item
    return [Result(m, str(found[m.id]["status"]), float(str(found[m.id]["seconds"])),
                   test=None if found[m.id]["test"] is None else str(found[m.id]["test"]),
                   detail=str(found[m.id]["detail"]))
            for m in mutants if m.id in found]


if __name__ == "__main__":
    sys.exit(main())
