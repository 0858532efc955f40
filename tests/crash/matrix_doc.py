"""``docs/crash-matrix.md``, generated from a run of the crash matrix (never edited by hand):
one row per failpoint, what the SIGKILLed process left, what resolved it, the end state, and
what happened when the process paused there instead, merged over the backend combinations
that ran; then the database faults (``test_db_faults.py``): one row per statement at which
the connection was cut (a run of the database faults alone replaces only their part); then
docs/mutation.md (``scripts/mutate --record``), the mutation score, always last."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

#: a row's key: its group first
K = TypeVar("K", bound=tuple[str, ...])


@dataclass(frozen=True)
class Row:
    group: str
    title: str
    point: str
    backend: str
    left: str
    resolved: str
    outcome: str


@dataclass(frozen=True)
class PauseRow:
    """The same failpoint with the process paused there instead (``test_pauses.py``)."""

    group: str
    title: str
    point: str
    backend: str
    text: str


@dataclass(frozen=True)
class DbFaultRow:
    """A writer step whose database connection was cut at one statement (``test_db_faults``):
    what the writer answered, what the client's retry got, what the sweep did and left."""

    group: str
    op: str
    step: str
    cut: str
    backend: str
    first: str
    retry: str
    after: str
    left: str


@dataclass
class MatrixRows:
    rows: list[Row] = field(default_factory=list)
    pauses: list[PauseRow] = field(default_factory=list)
    db_faults: list[DbFaultRow] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def add_pause(self, row: PauseRow) -> None:
        self.pauses.append(row)

    def add_db_fault(self, row: DbFaultRow) -> None:
        self.db_faults.append(row)


def _merge(values: dict[str, str]) -> str:
    """One text if every backend agrees, else one per store, per database or per backend."""
    distinct = set(values.values())
    if len(distinct) == 1:
        return distinct.pop()
    for part in (1, 0):  # by store, else by database
        by_part: dict[str, set[str]] = defaultdict(set)
        for backend, value in values.items():
            by_part[backend.split("-")[part]].add(value)
        if all(len(v) == 1 for v in by_part.values()):
            return "<br>".join(f"*{name}*: {next(iter(v))}" for name, v in sorted(by_part.items()))
    return "<br>".join(f"*{b}*: {v}" for b, v in sorted(values.items()))


def _by_group(order: list[K]) -> list[K]:
    """The keys with each group's together (a run interleaves the groups' cases), the
    groups and each group's keys in the order first seen."""
    rank: dict[str, int] = {}
    for key in order:
        rank.setdefault(key[0], len(rank))
    return sorted(order, key=lambda key: rank[key[0]])


def _tables(rows: list[Row], pause_rows: list[PauseRow], level: str
            ) -> tuple[list[str], list[str]]:
    """The backends that ran, and one table per group (headed ``level``)."""
    order: list[tuple[str, str, str]] = []
    cells: dict[tuple[str, str, str], dict[str, Row]] = defaultdict(dict)
    pauses: dict[tuple[str, str, str], dict[str, str]] = defaultdict(dict)
    for row in rows:
        key = (row.group, row.title, row.point)
        if key not in cells:
            order.append(key)
        cells[key][row.backend] = row
    for pause in pause_rows:
        key = (pause.group, pause.title, pause.point)
        if key not in cells and key not in pauses:
            order.append(key)
        pauses[key][pause.backend] = pause.text
    order = _by_group(order)
    backends = sorted({row.backend for row in rows} | {pause.backend for pause in pause_rows})
    lines: list[str] = []
    group = None
    for key in order:
        if key[0] != group:
            group = key[0]
            lines += [f"{level} {group.removeprefix(S3_GROUP)}", "",
                      "| dies at | it left | resolved by | end state | paused there instead "
                      "| backends |",
                      "| --- | --- | --- | --- | --- | --- |"]
        by_backend = cells[key]
        left = _merge({b: r.left for b, r in by_backend.items()}) if by_backend else "not run"
        resolved = _merge({b: r.resolved for b, r in by_backend.items()}) if by_backend else ""
        outcome = _merge({b: r.outcome for b, r in by_backend.items()}) if by_backend else ""
        paused = _merge(pauses[key]) if pauses[key] else "not run"
        ran = max(len(by_backend), len(pauses[key]))
        lines.append(f"| {key[1]} (`{key[2]}`) | {left} | {resolved} | {outcome} | {paused} | "
                     f"{ran}/{len(backends)} |")
        if key == order[-1] or order[order.index(key) + 1][0] != group:
            lines.append("")
    return backends, lines




#: the groups of the S3 endpoint's writers (``test_s3_endpoint.py``): a part of their own
S3_GROUP = "S3 endpoint: "
S3_PART = "## The S3 endpoint's writers"


def _is_s3(row: Row | PauseRow | DbFaultRow) -> bool:
    return row.group.startswith(S3_GROUP)


def render(rows: MatrixRows) -> str:
    """The kill and pause matrices of the ledger's own writers, uploads and workers."""
    backends, tables = _tables([r for r in rows.rows if not _is_s3(r)],
                               [p for p in rows.pauses if not _is_s3(p)], "##")
    return "\n".join([
        "# Crash matrix",
        "",
        "Generated by `scripts/crash-matrix` from a run of `tests/crash/test_matrix.py`; do not",
        "edit by hand. For each failpoint a child process ran the operation and was killed",
        "with SIGKILL at that point (no cleanup of any kind ran). Then, with the clock moved",
        "past the upload deadline, `sweep_after` and the delete grace, the sweeper (which also",
        "drives the deletion path) and the reconciler (`fix=True`) ran, and the invariant",
        "checker ran with `settled=True` (I1, I3, I4, I5); every row passed it. In the",
        "groups *then a retry* the create was resumed under its idempotency key before the",
        "sweep (I6); in *completed again* and *resumed by another process* a second process",
        "finished the same direct or tus upload (before the sweep, or while the first one",
        "slept). The tus rows run on every backend but S3, whose parts must hold 5 MiB (the",
        "matrix's uploads are four parts of 64 KiB; `tests/api/test_tus*.py` test S3 with",
        "real part sizes). `PutRefused`: a direct upload's client, woken after another one",
        "completed its upload, had its own put refused by the store (create-only).",
        'At `sweep.after_remove` the sweeper had removed the rows of the blobs it deleted and not',
        'sent its second delete of those names (conditioned on `pending`): the writers here are',
        'dead, so there is no late blob to meet. Had a writer paused in its upload landed one',
        'after the first delete, with its confirm lost while the row was still there, the kill',
        'would leave it tagged `pending` with no row: removed by the lifecycle rule on `pending`',
        'and by `reconcile --fix` (an orphan), as docs/protocol.md argues.',
        "",
        "The column *paused there instead* comes from `tests/crash/test_pauses.py`: the",
        "process stopped itself (SIGSTOP) at the same point; while it slept past its deadline",
        "the sweeper, the deletion path and the reconciler (`fix=True`) ran with the clock",
        "far past every cutoff (*meanwhile*); then it woke (SIGCONT) to that clock and",
        "finished (*woke*: acknowledged, or the error its caller got), and one more",
        "resolution ran (*then*). It must end with its bytes readable and acknowledged, or",
        "with a clear error and nothing changed; the settled invariants held on every row.",
        "",
        "The after-upload pipeline's failpoints are not in this matrix: their own tests kill",
        "(SIGKILL) a worker at each of them and pause it there (docs/pipeline.md says what each",
        "leaves and who resolves it): `events.after_{claim,send,mark}` in",
        "`tests/events/test_crash.py`, `processing.after_{claim,run,verdict}` in",
        "`tests/crash/test_held.py` (SIGSTOP for the pauses, as for the events), and",
        "`variant.after_{claim,read,render,upload,confirm,tag,attach}` in",
        "`tests/variants/test_crash.py` (kills) and `tests/variants/test_pause.py`",
        "(a maker held in process while the sweeper takes its claim). Every failpoint is listed in",
        "`blobledger/failpoints.py` (`tests/test_failpoints.py` checks the list against the",
        "sources).",
        "",
        f"Backends: {', '.join(backends)}. Run: {datetime.now(UTC):%Y-%m-%d}.",
        "",
        *tables])


#: where the S3 part's database faults begin
S3_FAULTS = "From `tests/crash/test_db_faults_s3.py`"


def render_s3(rows: MatrixRows, old: str | None = None) -> str:
    """The S3 endpoint's writers' part: the same columns, one table per operation, then
    the database faults; of the two, one the run has no rows of is kept from ``old``."""
    kept_head, _, kept_faults = (old or "").partition(f"\n{S3_FAULTS}")
    backends, tables = _tables([r for r in rows.rows if _is_s3(r)],
                               [p for p in rows.pauses if _is_s3(p)], "###")
    fault_backends, faults = _fault_tables([f for f in rows.db_faults if _is_s3(f)], "###")
    if faults:
        faults = [
            f"{S3_FAULTS}: the database connection cut at one",
            "statement of the endpoint's step, as in [Database faults](#database-faults), the",
            "request sent through the service's own app in process (signed as boto3 signs).",
            "*First answer* is the S3 client's; *retry's answer* is the same request sent",
            "again (a PUT has no idempotency key: while the first attempt's intent holds the",
            "key the retry is `OperationAborted`, and succeeds once the sweeper resolved that",
            "intent past its cutoff). Backends: " + ", ".join(fault_backends) + ".",
            "",
            *faults]
    elif kept_faults:
        faults = [f"{S3_FAULTS}{kept_faults}".rstrip("\n"), ""]
    if not tables and kept_head:
        return "\n".join([kept_head.rstrip("\n"), "", *faults])
    return "\n".join([
        S3_PART,
        "",
        "From `tests/crash/test_s3_endpoint.py`: the same points, passed through by the S3",
        "endpoint's writers. boto3's client sent PutObject (of a new key: a create; of an",
        "existing key: a replace) or DeleteObject to a real `blobledger serve` (forked, then",
        "run as the command line runs it, its sweeper off), which was SIGKILLed at the point",
        "(*it left* begins with what the client was told), then resolved and checked as above;",
        "or stopped there (SIGSTOP) while the sweeper, the deletion path and the reconciler ran",
        "far ahead, then woken to that clock (*the client*: what its request was answered).",
        "The stores run with `serve`'s own settings (on Azure a payload of 256 KiB is one Put",
        "Blob: no uncommitted blocks). A woken writer whose intent was swept answers",
        "`RequestTimeout`, which S3 clients retry; an acknowledged write was read back through",
        "the endpoint (GetObject: the bytes and the ETag). The multipart upload's steps",
        "(`tests/crash/test_s3_multipart.py`) went through the same server, the steps before",
        "the one stopped first; a woken step whose upload was swept answers `NoSuchUpload`,",
        "and the client then completes its upload (*then*).",
        "",
        f"Backends: {', '.join(backends)}.",
        "",
        *tables, *faults])


#: the heading of the section ``scripts/mutate --record`` writes (docs/mutation.md), kept at
#: the end of the crash matrix when it is generated again
MUTATION_HEADING = "## Mutation score"


def with_mutation_section(doc: str, section: str) -> str:
    """The crash matrix with ``section`` (docs/mutation.md) as its last section, in place of
    any earlier one."""
    kept = doc.split(f"\n{MUTATION_HEADING}\n", 1)[0].rstrip("\n")
    return f"{kept}\n\n{section.strip()}\n"


DB_FAULTS = "## Database faults"


def _fault_tables(rows: list[DbFaultRow], level: str) -> tuple[list[str], list[str]]:
    """The backends that ran, and one table of database faults per group."""
    order: list[tuple[str, str, str, str]] = []
    cells: dict[tuple[str, str, str, str], dict[str, DbFaultRow]] = defaultdict(dict)
    for row in rows:
        key = (row.group, row.op, row.step, row.cut)
        if key not in cells:
            order.append(key)
        cells[key][row.backend] = row
    order = _by_group(order)
    backends = sorted({row.backend for row in rows})
    lines: list[str] = []
    group = None
    for i, key in enumerate(order):
        if key[0] != group:
            group = key[0]
            title = group.removeprefix(S3_GROUP).split(": ", 1)[-1]
            lines += [f"{level} {title[:1].upper()}{title[1:]}", "",
                      "| step | cut | first answer | retry's answer | after the sweep "
                      "| backends |",
                      "| --- | --- | --- | --- | --- | --- |"]
        by = cells[key]
        merged = [_merge({b: getattr(r, f) for b, r in by.items()})
                  for f in ("first", "retry", "after")]
        lines.append(f"| {key[1]} {key[2]} | {key[3]} | " + " | ".join(merged)
                     + f" | {len(by)}/{len(backends)} |")
        if i == len(order) - 1 or order[i + 1][0] != group:
            lines.append("")
    return backends, lines


def render_db_faults(rows: list[DbFaultRow]) -> str:
    """The database faults' part of the document, one table per group."""
    backends, tables = _fault_tables(rows, "###")
    return "\n".join([
        DB_FAULTS,
        "",
        "From `tests/crash/test_db_faults.py`: a TCP proxy in front of PostgreSQL",
        "(`tests/support/pgproxy.py`) cut the writer's connection at one statement of one",
        "step: *before it is sent* (the transaction never applied) or, for `COMMIT`, *after it",
        "ran, unanswered* (it applied; the writer never heard). The writer's answer is *first",
        "answer*; then the client retried (a create under its idempotency key, a replace at",
        "the same version, a delete, a stage; an upload's client resumed its upload, or made",
        "a new one if it was never told of it; the sweeper ran again past its claim's lease,",
        "then the client of the dead attempt it swept retried under its key), with the",
        "database back (*retry's answer*);",
        "then the sweeper, the deletion path and the reconciler (`fix=True`) ran with the clock",
        "past every cutoff and the settled invariants held (*after the sweep*). In the second",
        "group every statement after the cut failed too, until the retry. SQLite has no",
        "connection to cut (it is a file in the writer's process): these rows are PostgreSQL's.",
        "`DBAPIError`: SQLAlchemy's error for the lost connection (the service answers 503).",
        "*C4 on a claimed row*: a sweeper claimed the intent after C3 and has not decided",
        "(the writer's C4 makes the roll-forward on the claimed row); *tus* and *direct*: a",
        "document's upload, *tus-stage*: an attachment's (one part each); *sweep*: on S3, a",
        "sweeper fences the intent of a create whose writer died after C2 under its key.",
        "",
        f"Backends: {', '.join(backends)}.",
        "",
        *tables])


def _part(doc: str, heading: str, ends: tuple[str, ...]) -> str | None:
    """The part of ``doc`` from ``heading`` to the first of ``ends`` after it (None: none)."""
    if heading not in doc:
        return None
    part = doc[doc.index(heading):]
    for end in ends:
        if f"\n{end}" in part:
            part = part[:part.index(f"\n{end}")]
    return part.rstrip("\n")


def write_matrix(path: Path, rows: MatrixRows) -> None:
    """The document's parts from a run: the kill and pause matrices, the S3 endpoint's
    writers, the database faults; a part the run has no rows of is kept from the existing
    document. docs/mutation.md, when it exists, is the last section."""
    path.parent.mkdir(parents=True, exist_ok=True)
    old = _without_mutation(path.read_text()) if path.exists() else ""
    ours = [r for r in rows.rows if not _is_s3(r)] + [p for p in rows.pauses if not _is_s3(p)]
    s3 = ([r for r in rows.rows if _is_s3(r)] + [p for p in rows.pauses if _is_s3(p)]
          + [f for f in rows.db_faults if _is_s3(f)])
    db_faults = [f for f in rows.db_faults if not _is_s3(f)]
    main = render(rows) if ours else (_part(old, "# Crash matrix", (S3_PART, DB_FAULTS))
                                      or "# Crash matrix")
    old_s3 = _part(old, S3_PART, (DB_FAULTS,))
    s3_part = render_s3(rows, old_s3) if s3 else old_s3
    faults = render_db_faults(db_faults) if db_faults else _part(old, DB_FAULTS, ())
    text = "\n\n".join(part.rstrip("\n") for part in (main, s3_part, faults) if part)
    mutation = path.with_name("mutation.md")
    if mutation.exists():
        text = with_mutation_section(text, mutation.read_text())
    path.write_text(text.rstrip("\n") + "\n")


def _without_mutation(doc: str) -> str:
    return doc.split(f"\n{MUTATION_HEADING}\n", 1)[0]
