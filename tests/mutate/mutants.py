"""The mutants of the fences, found in the sources' syntax trees (so that a guard added later is
picked up without a list to keep): each is one byte range of one file and its replacement.

Kinds:

- ``where``: one term dropped from a ``.where(...)`` of an ``update``/``delete`` in
  ``transitions`` (a compare-and-set condition, or its ``exists()`` subquery's), or of a
  one-statement step's join in ``single`` (C4's document conditioned on its blob's); a
  ``*_mine``-style tuple is expanded in place, so each statement that uses it loses the term
  on its own; ``read``: the same for a ``select`` (a guard's read, a claim's candidates);
- ``rowcount``: a compare-and-set's result check (``_count(...) != 1``, ``== 1``; ``len(rows)
  == 1`` on the rows it returned; ``if row is None`` / ``if not rows`` on what a statement
  returned) inverted, or forced to "won" (the statement still runs);
- ``lease``: a comparison with the database's clock (``NOW``, ``CUTOFF``, ...) in
  ``transitions``, or an age comparison in the reconciler, made inclusive or reversed;
- ``store``: a condition passed to the storage service's delete or tag call dropped, or a
  store's own ``raise ConditionNotMet`` check skipped;
- ``recheck``: the reconciler's re-read of the row before it deletes or discards, ignored;
- ``retag``: the deferred retag's own guards: the retag worker's tag write without its
  ``pending`` condition, its judgement that a blob not tagged ``pending`` is done made
  always "done" (and its other answers after a failed tag write made "tagged"), and C4's
  refusal (deferred) to roll forward on a claimed row dropped;
- ``tag``: a writer's or worker's conditioned retag (C3's, the deletion path's, the
  reconciler's) without its condition, a refused retag taken for done, or a judgement of
  the tag read after a refusal made always "done";
- ``integration``: an application integration's attach or detach (SQLAlchemy, Django)
  left out, or its refusal ignored;
- ``setting``: a settings safety check (a signed URL's expiry within the grace, the sweep
  past the deadline, an event lease past its timeout) skipped, or its margin dropped;
- ``condition``: a condition the S3 endpoint checks in Python before it writes (an
  ``If-Match`` ETag, a create-only ``If-None-Match``, a DeleteObjects key's ``<ETag>``, an
  ``aws-chunked`` chunk's signature), or an upload's termination whose outcome the
  database could not tell (the upload re-read still open): its ``if ...: raise`` refusal
  skipped;
- ``cleanup``: a writer's or sweeper's removal of bytes that landed after their row was
  gone (a lost writer's ``drop_lost``, the sweeper's late delete after it removed the
  rows) skipped: what a paused writer published late is then left to ``reconcile --fix``;
- ``group``: group commit's per-run decisions (a lost connection under a batch taken for a
  refused one, a run's answer to go alone taken for its result, a batch's run given another
  run's row).

Which modules are searched, and with what, is :data:`REGISTRY`; every guard-shaped piece
of code under ``src/`` must be enumerated from it or named in :data:`NOT_FENCES` with the
reason (``tests/mutate/test_mutants.py`` scans for them: :mod:`tests.mutate.shapes`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: the files whose fences are mutated, relative to ``src/``: the transitions' rooms (the
#: package :mod:`blobledger.protocol.transitions`, one room per writer it serves)
TRANSITIONS = tuple(f"blobledger/protocol/transitions/{room}.py" for room in (
    "statements", "documents", "uploads", "attachments", "workers"))
#: C1 and C4 as one statement each (their own joins of the transitions' statements)
SINGLE = "blobledger/protocol/single.py"
RECONCILER = "blobledger/workers/reconciler.py"
RETAGGER = "blobledger/workers/retagger.py"
#: the stores: the Azure store's rooms (its writes, its conditioned writes, its reads)
AZURE = tuple(f"blobledger/stores/azure/{room}.py"
              for room in ("store", "conditions", "reads", "lean"))
STORES = ("blobledger/stores/local.py", *AZURE, "blobledger/stores/s3/store.py")
KINDS = ("where", "read", "rowcount", "lease", "store", "recheck", "retag", "tag",
         "integration", "setting", "condition", "group", "cleanup")

#: the database clock's bound times in ``transitions`` (a comparison with one is a lease or age)
CLOCK = {"NOW", "LEASE", "CUTOFF", "EXPIRES", "LATER"}
#: names of an age in the reconciler
AGE = re.compile(r"age|older_than|deadline|cutoff")
#: the storage services' calls that delete or retag, and the keywords that condition them
SERVICE_CALLS = {"delete_blob", "delete_blobs", "delete_object", "set_blob_tags",
                 "upload_blob", "commit_block_list", "put_object", "complete_multipart_upload"}
CONDITION_KEYWORDS = {"if_tags_match_condition", "IfMatch", "etag", "match_condition",
                      "IfNoneMatch", "if_none_match"}
#: keys of a dict literal that conditions a request (a presigned one's parameters, the
#: headers a client must send, an SDK's keyword arguments)
CONDITION_KEYS = {"IfNoneMatch", "If-None-Match", "IfMatch", "If-Match",
                  "if_tags_match_condition", "match_condition", "x-ms-if-tags"}
#: the reconciler's re-reads of a row
RECHECKS = {"_row_state", "still_unreferenced"}
SWAP = {ast.Lt: ("<=", ">"), ast.LtE: ("<", ">"), ast.Gt: (">=", "<"), ast.GtE: (">", "<")}
OP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
OP_SLUG = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


@dataclass(frozen=True)
class Mutant:
    """One weakened guard: bytes ``start:end`` of ``path`` (under ``src/``) replaced."""

    id: str
    kind: str
    path: str
    line: int
    context: str  # the statement (module-level name) or function the guard is in
    description: str
    start: int
    end: int
    replacement: str

    def apply(self, source: bytes) -> bytes:
        return source[:self.start] + self.replacement.encode() + source[self.end:]

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "kind": self.kind, "path": self.path, "line": self.line,
                "context": self.context, "description": self.description}


@dataclass
class _Source:
    path: str
    data: bytes
    tree: ast.Module
    line_starts: list[int] = field(init=False)
    #: the other rooms of the module this one was split from (:data:`SPLIT`): a tuple of
    #: terms one of them defines (``_mine``) is expanded here too
    rooms: list[_Source] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Byte offsets of a node (``col_offset`` counts UTF-8 bytes)."""
        start = self.line_starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = self.line_starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        return start, end

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()


#: a module split into rooms keeps its mutants' ids: a room's path (or the folder of a
#: package of rooms) -> the module's id part. A guard keeps its function's (or statement's)
#: name in its room, so its id is the one it had in the module
SPLIT = {"blobledger/protocol/transitions/": "transitions",
         "blobledger/protocol/ledger/": "ledger",
         "blobledger/workers/sweeper/": "sweeper",
         **dict.fromkeys(AZURE, "stores/azure/store")}


def _short(path: str) -> str:
    """A mutant id's module part: the path under the package without its layer folder
    (``protocol/events.py`` is ``events``), and ``config`` for every module of the settings'
    package, so the ids outlive a move; a room of a module split into several
    (:data:`SPLIT`) answers for the module."""
    for room, short in SPLIT.items():
        if path.startswith(room):
            return short
    short = path.removeprefix("blobledger/").removesuffix(".py")
    if short.startswith("config/"):
        return "config"
    for layer in ("protocol/", "workers/", "uploads/"):
        short = short.removeprefix(layer)
    return short


def _flat(text: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def _contexts(tree: ast.Module) -> dict[int, str]:
    """``id(node) -> context`` for every node: its function, else its module-level name."""
    found: dict[int, str] = {}

    def mark(node: ast.AST, context: str) -> None:
        for child in ast.walk(node):
            found.setdefault(id(child), context)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for child in ast.walk(node):  # innermost function wins: walk inner ones later
                found[id(child)] = node.name
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            mark(node, node.targets[0].id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            mark(node, node.target.id)
    return found


def _column(node: ast.AST) -> str:
    """``table.column`` of the first ``<table>.c.<column>`` in a term, or what it calls."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "exists":
        return "exists"
    for child in ast.walk(node):
        if (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Attribute)
                and child.value.attr == "c" and isinstance(child.value.value, ast.Name)):
            return f"{child.value.value.id}.{child.attr}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return "term"


class _Ids:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, base: str) -> str:
        count = self.seen.get(base, 0) + 1
        self.seen[base] = count
        return base if count == 1 else f"{base}#{count}"


def _call_text(source: _Source, call: ast.Call, parts: list[str]) -> str:
    return f"{source.text(call.func)}({', '.join(parts)})"


def _call_parts(source: _Source, call: ast.Call) -> list[str]:
    return [source.text(a) for a in call.args] + [source.text(k) for k in call.keywords]


def _where(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    tuples: dict[str, list[str]] = {}
    #: ``_mine = and_(a, b)`` used as ``.where(_mine)``: its terms, each dropped on its own
    ands: dict[str, list[str]] = {}
    for room in (*source.rooms, source):  # its own rooms' last: their names win
        tuples |= {node.targets[0].id: [room.text(e) for e in node.value.elts]
                   for node in room.tree.body
                   if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                   and isinstance(node.value, ast.Tuple)}
        ands |= {node.targets[0].id: [room.text(e) for e in node.value.args]
                 for node in room.tree.body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                 and node.value.func.id == "and_"}
    wheres = [n for n in ast.walk(source.tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and n.func.attr == "where"]
    nested = {id(inner) for outer in wheres for arg in outer.args for inner in ast.walk(arg)}
    reads = {id(call) for call in wheres if _statement(call) == "select"} - nested
    for call in wheres:
        terms: list[tuple[str, str]] = []  # (text, slug)
        for arg in call.args:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) \
                    and arg.value.id in tuples:
                for text in tuples[arg.value.id]:
                    terms.append((text, _column(ast.parse(text, mode="eval").body)))
            elif isinstance(arg, ast.Name) and arg.id in ands:
                for text in ands[arg.id]:
                    terms.append((text, _column(ast.parse(text, mode="eval").body)))
            else:
                terms.append((source.text(arg), _column(arg)))
        context = contexts.get(id(call), "?")
        start, end = source.span(call)
        prefix = "sub." if id(call) in nested else ""
        kind = "read" if id(call) in reads else "where"
        for i, (text, slug) in enumerate(terms):
            rest = [t for j, (t, _) in enumerate(terms) if j != i]
            yield Mutant(
                ids(f"{kind}:{_short(source.path)}:{context}:{prefix}{slug}"), kind,
                source.path, call.lineno, context, f"drop `{_flat(text)}`", start, end,
                _call_text(source, call, rest))


def _statement(node: ast.AST) -> str | None:
    """The function a call chain is built on (``update`` for ``update(t).where(...)``)."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return node.func.id
        node = node.func if isinstance(node, ast.Call) else node.value
    return None


def _executed_names(function: ast.AST) -> set[str]:
    """Names a function binds to a statement's result (``row = (await conn.execute(...))``)."""
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == "execute" for c in ast.walk(node.value)):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _lost_test(test: ast.expr, names: set[str]) -> bool:
    """``x is None`` or ``not x`` on a statement's result: the branch of a lost step."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Name) and test.operand.id in names
    return (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is) and isinstance(test.left, ast.Name)
            and test.left.id in names and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None)


def _result_check(source: _Source, node: ast.Compare, short: str, context: str,
                  ids: _Ids) -> Iterator[Mutant]:
    """A compare-and-set's result check (``== 1`` / ``!= 1``) inverted, and forced to won."""
    start, end = source.span(node)
    text = source.text(node)
    equal = isinstance(node.ops[0], ast.Eq)
    other = "!=" if equal else "=="
    yield Mutant(ids(f"rowcount:{short}:{context}:inverted"), "rowcount", source.path,
                 node.lineno, context, f"`{_flat(text)}` inverted ({other})", start,
                 end, f"({source.text(node.left)} {other} "
                      f"{source.text(node.comparators[0])})")
    yield Mutant(ids(f"rowcount:{short}:{context}:won"), "rowcount", source.path,
                 node.lineno, context, f"`{_flat(text)}` forced to won", start, end,
                 f"(({text}) or True)" if equal else f"(({text}) and False)")


def _rowcount(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Eq | ast.NotEq)
                and isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name)
                and (node.left.func.id == "_count" or (
                    node.left.func.id == "len" and isinstance(node.comparators[0], ast.Constant)))):
            context = contexts.get(id(node), "?")
            yield from _result_check(source, node, short, context, ids)
    for function in ast.walk(source.tree):
        if not isinstance(function, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        names = _executed_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.If) and _lost_test(node.test, names):
                start, end = source.span(node.test)
                text = source.text(node.test)
                yield Mutant(ids(f"rowcount:{short}:{function.name}:lost-check-won"), "rowcount",
                             source.path, node.lineno, function.name,
                             f"`if {_flat(text)}:` forced to won", start, end,
                             f"(({text}) and False)")


def _compares(source: _Source, contexts: dict[int, str], ids: _Ids,
              clock: bool) -> Iterator[Mutant]:
    """Lease comparisons with the database clock (``clock``) or age comparisons."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1
                and type(node.ops[0]) in SWAP):
            continue
        left, right = node.left, node.comparators[0]
        if clock:
            names = {n.id for side in (left, right) for n in ast.walk(side)
                     if isinstance(n, ast.Name)}
            if not names & CLOCK:
                continue
            slug = _column(node)
        else:
            text = source.text(node)
            if not AGE.search(text):
                continue
            slug = re.sub(r"[^a-z_]+", "", source.text(right).split(".")[-1]) or "value"
        context = contexts.get(id(node), "?")
        op = OP_TEXT[type(node.ops[0])]
        start, end = source.span(node)
        for new, how in zip(SWAP[type(node.ops[0])], ("boundary", "reversed"), strict=True):
            yield Mutant(
                ids(f"lease:{short}:{context}:{slug}:{OP_SLUG[op]}-to-{OP_SLUG[new]}"), "lease",
                source.path, node.lineno, context,
                f"`{_flat(source.text(node))}`: {op} to {new} ({how})", start, end,
                f"({source.text(left)} {new} {source.text(right)})")


def _raises_condition(node: ast.If) -> bool:
    return any(isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call)
               and isinstance(s.exc.func, ast.Name) and s.exc.func.id == "ConditionNotMet"
               for s in node.body)


def _store(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    short = _short(source.path)
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SERVICE_CALLS):
            parts = _call_parts(source, node)
            start, end = source.span(node)
            offset = len(node.args)
            for i, keyword in enumerate(node.keywords):
                if keyword.arg is not None and keyword.arg not in CONDITION_KEYWORDS:
                    continue
                name = keyword.arg or "unpacked"
                rest = [p for j, p in enumerate(parts) if j != offset + i]
                yield Mutant(ids(f"store:{short}:{context}:{node.func.attr}-without-{name}"),
                             "store", source.path, node.lineno, context,
                             f"{node.func.attr}() without `{_flat(source.text(keyword))}`",
                             start, end, _call_text(source, node, rest))
        elif isinstance(node, ast.Dict) and any(
                k is None and "_delete_options" in source.text(v)
                for k, v in zip(node.keys, node.values, strict=True)):
            items = [f"**{source.text(v)}" if k is None else f"{source.text(k)}: "
                     f"{source.text(v)}" for k, v in zip(node.keys, node.values, strict=True)]
            start, end = source.span(node)
            for i, (k, v) in enumerate(zip(node.keys, node.values, strict=True)):
                if k is None:
                    rest = [item for j, item in enumerate(items) if j != i]
                    yield Mutant(ids(f"store:{short}:{context}:batch-without-condition"), "store",
                                 source.path, node.lineno, context,
                                 f"a batch delete without `**{_flat(source.text(v))}`",
                                 start, end, "{" + ", ".join(rest) + "}")
        elif isinstance(node, ast.If) and _raises_condition(node):
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"store:{short}:{context}:check-skipped"), "store", source.path,
                         node.lineno, context, f"`if {_flat(text)}: raise ConditionNotMet` "
                         "skipped", start, end, f"(({text}) and False)")


def _recheck(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    short = _short(source.path)
    for function in ast.walk(source.tree):
        if not isinstance(function, ast.AsyncFunctionDef):
            continue
        reread = {t.id for n in ast.walk(function) if isinstance(n, ast.Assign)
                  for t in n.targets if isinstance(t, ast.Name)
                  and any((isinstance(c, ast.Name) and c.id in RECHECKS)
                          or (isinstance(c, ast.Attribute) and c.attr in RECHECKS)
                          for c in ast.walk(n.value))}
        for node in ast.walk(function):
            if not isinstance(node, ast.If):
                continue
            uses = {c.id if isinstance(c, ast.Name) else c.attr for c in ast.walk(node.test)
                    if isinstance(c, ast.Name | ast.Attribute)}
            if not uses & (RECHECKS | reread):
                continue
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"recheck:{short}:{function.name}:ignored"), "recheck",
                         source.path, node.lineno, function.name,
                         f"`if {_flat(text)}:` ignored", start, end, f"(({text}) and False)")


def _retag(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """The deferred retag's guards: in the retag worker, its ``set_tags`` condition and its
    ``state == ...COMMITTED`` judgement; in ``transitions``, a ``deferred or ...`` term."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "set_tags"):
            parts = _call_parts(source, node)
            start, end = source.span(node)
            for i, keyword in enumerate(node.keywords):
                if keyword.arg != "if_tags":
                    continue
                rest = [p for j, p in enumerate(parts) if j != len(node.args) + i]
                yield Mutant(ids(f"retag:{short}:{context}:set_tags-without-if_tags"),
                             "retag", source.path, node.lineno, context,
                             f"set_tags() without `{_flat(source.text(keyword))}`",
                             start, end, _call_text(source, node, rest))
        elif (source.path == RETAGGER and isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], ast.Eq)
              and source.text(node.comparators[0]).endswith("COMMITTED")):
            start, end = source.span(node)
            yield Mutant(ids(f"retag:{short}:{context}:judged-committed"), "retag",
                         source.path, node.lineno, context,
                         f"`{_flat(source.text(node))}` always true", start, end, "True")
        elif (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
              and isinstance(node.values[0], ast.Name) and node.values[0].id == "deferred"):
            start, end = source.span(node.values[0])
            yield Mutant(ids(f"retag:{short}:{context}:deferred-term-dropped"), "retag",
                         source.path, node.lineno, context,
                         "`deferred or ...`: the deferred term dropped (False)", start, end,
                         "False")


def _in_handler(tree: ast.Module, exception: str) -> set[int]:
    """``id(node)`` of every node inside an ``except <exception>`` handler."""
    inside: set[int] = set()
    for handler in ast.walk(tree):
        if isinstance(handler, ast.ExceptHandler) and handler.type is not None and any(
                isinstance(n, ast.Name) and n.id == exception for n in ast.walk(handler.type)):
            for child in handler.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _reraises(node: ast.If) -> bool:
    return len(node.body) == 1 and isinstance(node.body[0], ast.Raise) \
        and node.body[0].exc is None


def _is_rowcount(node: ast.expr) -> bool:
    """``int(getattr(result, "rowcount", 0))`` or ``_rowcount(result)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    if node.func.id == "_rowcount":
        return True
    return node.func.id == "int" and any(
        isinstance(n, ast.Constant) and n.value == "rowcount" for n in ast.walk(node))


def _read_result(node: ast.expr) -> bool:
    """``(await conn.execute(...)).first()`` (or ``one_or_none``, ``scalar_one_or_none``)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"first", "one_or_none", "scalar_one_or_none"}
            and any(isinstance(c, ast.Attribute) and c.attr == "execute"
                    for c in ast.walk(node.func.value)))


def _rowcount_more(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A result check written without ``_count``: ``int(getattr(r, "rowcount", 0)) == 1``
    inverted or forced won; a guard's read checked inline (``(await conn.execute(...))
    .first() is None``) forced to found; a step's refusal (``(x := await f(...)) is not
    None``) ignored."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Eq | ast.NotEq) and _is_rowcount(node.left)):
            yield from _result_check(source, node, short, context, ids)
        elif isinstance(node, ast.If) and isinstance(node.test, ast.Compare) \
                and len(node.test.ops) == 1 and isinstance(node.test.comparators[0], ast.Constant) \
                and node.test.comparators[0].value is None:
            test, op = node.test, node.test.ops[0]
            start, end = source.span(test)
            text = source.text(test)
            if isinstance(op, ast.Is) and _read_result(test.left):
                yield Mutant(ids(f"rowcount:{short}:{context}:lost-check-won"), "rowcount",
                             source.path, node.lineno, context,
                             f"`if {_flat(text)}:` forced to found", start, end,
                             f"(({text}) and False)")
            elif isinstance(op, ast.IsNot) and isinstance(test.left, ast.NamedExpr) \
                    and isinstance(test.left.value, ast.Await):
                yield Mutant(ids(f"rowcount:{short}:{context}:refusal-ignored"), "rowcount",
                             source.path, node.lineno, context,
                             f"`if {_flat(text)}:` ignored", start, end,
                             f"(({text}) and False)")


def _store_more(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A store's conditions beyond its calls' keywords: a condition key of a dict literal
    dropped (a presigned request's parameters, the headers a client is told to send, an
    SDK's options); a refusal re-raised under ``except ConditionNotMet`` swallowed; on the
    local disk, the blob's ``flock`` not taken, the inode re-check under it skipped, the
    create-only ``os.link`` made an overwriting ``os.replace``, a delete's tag or ETag
    comparison taken as met."""
    short = _short(source.path)
    refused = _in_handler(source.tree, "ConditionNotMet")
    for function in ast.walk(source.tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        checked = {n.test.operand.id for n in ast.walk(function) if isinstance(n, ast.If)
                   and _raises_condition(n) and isinstance(n.test, ast.UnaryOp)
                   and isinstance(n.test.op, ast.Not) and isinstance(n.test.operand, ast.Name)}
        for node in ast.walk(function):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id in checked):
                start, end = source.span(node.value)
                yield Mutant(ids(f"store:{short}:{function.name}:{node.targets[0].id}-forced"),
                             "store", source.path, node.lineno, function.name,
                             f"`{node.targets[0].id} = {_flat(source.text(node.value))}` "
                             "forced true", start, end, "True")
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if isinstance(node, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
            for i, key in enumerate(keys):
                if key not in CONDITION_KEYS:
                    continue
                items = [f"**{source.text(v)}" if k is None else f"{source.text(k)}: "
                         f"{source.text(v)}" for k, v in zip(node.keys, node.values, strict=True)]
                rest = [item for j, item in enumerate(items) if j != i]
                start, end = source.span(node)
                yield Mutant(ids(f"store:{short}:{context}:dict-without-{key}"), "store",
                             source.path, node.lineno, context,
                             f"`{key}` dropped from `{_flat(source.text(node), 60)}`", start,
                             end, "{" + ", ".join(rest) + "}")
        elif isinstance(node, ast.If) and id(node) in refused and _reraises(node):
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"store:{short}:{context}:refusal-swallowed"), "store",
                         source.path, node.lineno, context,
                         f"`if {_flat(text)}: raise` (a refusal) skipped", start, end,
                         f"(({text}) and False)")
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "flock"):
            start, end = source.span(node.value)
            yield Mutant(ids(f"store:{short}:{context}:without-flock"), "store", source.path,
                         node.lineno, context, f"`{_flat(source.text(node.value))}` not taken",
                         start, end, "None")
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], ast.Eq) and all(
                  isinstance(side, ast.Attribute) and side.attr == "st_ino"
                  for side in (node.left, node.comparators[0]))):
            start, end = source.span(node)
            yield Mutant(ids(f"store:{short}:{context}:inode-check-skipped"), "store",
                         source.path, node.lineno, context,
                         f"`{_flat(source.text(node))}` always true", start, end, "True")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "link" and isinstance(node.func.value, ast.Name)
              and node.func.value.id == "os"):
            start, end = source.span(node)
            parts = _call_parts(source, node)
            yield Mutant(ids(f"store:{short}:{context}:link-made-replace"), "store",
                         source.path, node.lineno, context,
                         f"create-only `{_flat(source.text(node))}` made an overwriting "
                         "`os.replace`", start, end, f"os.replace({', '.join(parts)})")


#: what a writer or worker re-reads before it destroys or decides (a row, an owner, a lease)
RECHECK_CALLS = {"pointed_at", "owner_holds"}
#: a row's column computed by the guard's read: a lease that lapsed
RECHECK_ATTRS = {"lapsed"}
#: calls that take the re-check's verdict as a predicate (``lambda state, ready: ...``)
RECHECK_PREDICATES = {"retag_if_still"}
#: store calls that destroy or retag: a re-check guarding one is weakened to "go ahead"
DESTROYS = {"delete", "delete_many", "set_tags"}


def _recheck_names(function: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        calls = [c for c in ast.walk(node.value) if isinstance(c, ast.Call)]
        if any((isinstance(c.func, ast.Attribute) and c.func.attr in RECHECK_CALLS)
               or (isinstance(c.func, ast.Name) and c.func.id in RECHECK_CALLS)
               or (isinstance(c.func, ast.Attribute) and c.func.attr == "get" and c.args
                   and isinstance(c.args[0], ast.Name) and c.args[0].id == "BlobRow")
               for c in calls):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _recheck_more(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """Python-level re-checks: an ``if`` on a row re-read (``session.get(BlobRow, ...)``), an
    owner's hold (``owner_holds``), the names a document or owner still points at
    (``pointed_at``) or a lease's lapse (``row.lapsed``) ignored: a guard in front of a
    destroying call made to pass, one in front of a refusal never to; a comprehension's
    filter on such a re-read dropped."""
    short = _short(source.path)
    for call in ast.walk(source.tree):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr in RECHECK_PREDICATES):
            for arg in call.args:
                if isinstance(arg, ast.Lambda):
                    context = contexts.get(id(arg), "?")
                    start, end = source.span(arg.body)
                    yield Mutant(ids(f"recheck:{short}:{context}:still-forced"), "recheck",
                                 source.path, arg.lineno, context,
                                 f"the re-read row's verdict `{_flat(source.text(arg.body))}` "
                                 "forced true", start, end, "True")
    for function in ast.walk(source.tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        reread = _recheck_names(function)
        for node in ast.walk(function):
            tests: list[ast.expr] = []
            if isinstance(node, ast.If):
                tests = [node.test]
            elif isinstance(node, ast.comprehension):
                tests = list(node.ifs)
            for test in tests:
                uses = {c.id for c in ast.walk(test) if isinstance(c, ast.Name)}
                attrs = {c.attr for c in ast.walk(test) if isinstance(c, ast.Attribute)}
                if not (uses & (reread | RECHECK_CALLS) or attrs & (RECHECK_ATTRS
                                                                   | RECHECK_CALLS)):
                    continue
                start, end = source.span(test)
                text = source.text(test)
                if isinstance(node, ast.comprehension):
                    how, replacement = "filter dropped", "True"
                elif isinstance(node, ast.If) and any(
                        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                        and c.func.attr in DESTROYS for s in node.body for c in ast.walk(s)):
                    how, replacement = "made to pass", f"(({text}) or True)"
                else:
                    how, replacement = "ignored", f"(({text}) and False)"
                yield Mutant(ids(f"recheck:{short}:{function.name}:ignored"), "recheck",
                             source.path, test.lineno, function.name,
                             f"`{_flat(text)}` {how}", start, end, replacement)


def _tag(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A writer's or worker's retag: ``set_tags`` without its ``if_tags``; a refusal
    re-raised under ``except ConditionNotMet`` taken for done; the answer ``"tagged" if
    <the tag read after a refusal> else ...`` always "tagged"."""
    short = _short(source.path)
    refused = _in_handler(source.tree, "ConditionNotMet")
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "set_tags"):
            parts = _call_parts(source, node)
            start, end = source.span(node)
            for i, keyword in enumerate(node.keywords):
                if keyword.arg != "if_tags":
                    continue
                rest = [p for j, p in enumerate(parts) if j != len(node.args) + i]
                yield Mutant(ids(f"tag:{short}:{context}:set_tags-without-if_tags"), "tag",
                             source.path, node.lineno, context,
                             f"set_tags() without `{_flat(source.text(keyword))}`", start,
                             end, _call_text(source, node, rest))
        elif isinstance(node, ast.If) and id(node) in refused and _reraises(node):
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"tag:{short}:{context}:refusal-taken-for-done"), "tag",
                         source.path, node.lineno, context,
                         f"`if {_flat(text)}: raise` (a refused retag) skipped", start, end,
                         f"(({text}) and False)")
        elif (isinstance(node, ast.IfExp) and isinstance(node.body, ast.Constant)
              and node.body.value == "tagged"):
            start, end = source.span(node.test)
            yield Mutant(ids(f"tag:{short}:{context}:judged-tagged"), "tag", source.path,
                         node.lineno, context,
                         f"`{_flat(source.text(node))}`: always \"tagged\"", start, end,
                         "True")


def _retag_answers(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """The retag worker's other answers after a failed tag write (a ``return "..."`` in an
    ``except`` of ``_retag``) made "tagged": the retag recorded as done."""
    short = _short(source.path)
    seen: set[int] = set()
    for handler in ast.walk(source.tree):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        for node in ast.walk(handler):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if (isinstance(node, ast.Return) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str) and node.value.value != "tagged"):
                context = contexts.get(id(node), "?")
                start, end = source.span(node.value)
                yield Mutant(ids(f"retag:{short}:{context}:{node.value.value}-answered-tagged"),
                             "retag", source.path, node.lineno, context,
                             f"`return {source.text(node.value)}` (in `except "
                             f"{source.text(handler.type) if handler.type else ''}`) made "
                             "\"tagged\"", start, end, '"tagged"')


#: an application integration's calls that attach (A4, the owner column's sync), detach, or
#: tag a blob staged inside the application's transaction after its commit (A3)
INTEGRATION_CALLS = {"detach_owner", "sync_owner_column", "sync_column", "tag_after_commit"}


def _integration(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """An integration's attach, detach or after-commit retag left out; a compare-and-set's
    refusal (``if not step(...): raise``) ignored."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else None)
            if name in INTEGRATION_CALLS:
                start, end = source.span(node.value)
                yield Mutant(ids(f"integration:{short}:{context}:{name}-left-out"),
                             "integration", source.path, node.lineno, context,
                             f"`{_flat(source.text(node.value))}` left out", start, end, "None")
        elif (isinstance(node, ast.If) and isinstance(node.test, ast.UnaryOp)
              and isinstance(node.test.op, ast.Not) and isinstance(node.test.operand, ast.Call)
              and isinstance(node.test.operand.func, ast.Name)
              and node.test.operand.func.id not in {"isinstance", "all", "any", "callable"}
              and len(node.body) == 1 and isinstance(node.body[0], ast.Raise)):
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"integration:{short}:{context}:refusal-ignored"), "integration",
                         source.path, node.lineno, context, f"`if {_flat(text)}: raise` "
                         "ignored", start, end, f"(({text}) and False)")


#: the settings' safety checks, by module: a signed URL's expiry within the delete grace
#: (with the clocks' skew), the sweep past the upload deadline (with its margin), an event
#: claim's lease past one webhook call
SAFETY = {"blobledger/config/settings.py": {"_sweep_after_past_the_deadline",
                                            "_urls_within_the_grace", "_webhooks_signed",
                                            "_processors_configured"},
          "blobledger/config/protocol.py": {"url_expiry_problem", "read_url_lifetime",
                                            "minimum_sweep_after"},
          "blobledger/django/storage.py": {"url_lifetime"}}
#: the margins a safety check adds (dropping one leaves the bare comparison)
MARGINS = {"CLOCK_SKEW", "sweep_margin"}


def _setting(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A safety check of the settings skipped (``if <unsafe>: raise`` never raises, ``if
    <safe>: return None`` always passes) or its margin dropped (``+ CLOCK_SKEW``,
    ``+ sweep_margin(...)``)."""
    short = _short(source.path)
    for function in ast.walk(source.tree):
        if not (isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
                and function.name in SAFETY.get(source.path, ())):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.If) and node.body and isinstance(node.body[-1], ast.Raise):
                start, end = source.span(node.test)
                text = source.text(node.test)
                yield Mutant(ids(f"setting:{short}:{function.name}:check-skipped"), "setting",
                             source.path, node.lineno, function.name,
                             f"`if {_flat(text)}: raise` skipped", start, end,
                             f"(({text}) and False)")
            elif (isinstance(node, ast.If) and len(node.body) == 1
                  and isinstance(node.body[0], ast.Return)
                  and isinstance(node.body[0].value, ast.Constant)
                  and node.body[0].value.value is None):
                start, end = source.span(node.test)
                text = source.text(node.test)
                yield Mutant(ids(f"setting:{short}:{function.name}:always-accepted"),
                             "setting", source.path, node.lineno, function.name,
                             f"`if {_flat(text)}: return None` always taken", start, end,
                             f"(({text}) or True)")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub) and any(
                    isinstance(n, ast.Name) and n.id in MARGINS for n in ast.walk(node.right)):
                start, end = source.span(node)
                yield Mutant(ids(f"setting:{short}:{function.name}:margin-dropped"),
                             "setting", source.path, node.lineno, function.name,
                             f"`{_flat(source.text(node))}`: the margin dropped", start, end,
                             f"({source.text(node.left)})")


def _load(src: Path, path: str) -> _Source:
    data = (src / path).read_bytes()
    return _Source(path, data, ast.parse(data, filename=path))


def _expiry(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A signed link's expiry checked in Python (``now <= expires <= now + lifetime``, on
    the service's clock) taken as met: an expired link, or one claiming to outlive the
    lifetime its blob is kept for, admitted."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(n, ast.Name) and n.id.startswith("expires")
                for n in ast.walk(node)):
            context = contexts.get(id(node), "?")
            start, end = source.span(node)
            yield Mutant(ids(f"lease:{short}:{context}:expiry-skipped"), "lease", source.path,
                         node.lineno, context, f"`{_flat(source.text(node))}` always true",
                         start, end, "True")


#: the S3 endpoint's refusals of a write whose condition does not hold, an upload's
#: termination refused while its outcome is unknown, and a completion's failed publication
#: judged by its upload's row (swept meanwhile: ``BlobNotFound``, whatever the store said)
#: (in the text of what the ``if`` raises)
REFUSALS = ("PreconditionFailed", "failed(", "SignatureDoesNotMatch", "DatabaseUnavailable",
            "BlobNotFound(")


def _condition(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """An ``if <condition fails>: raise <refusal>`` of the S3 endpoint never taken: the
    write (or delete) goes on as if the client's condition held."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if not (isinstance(node, ast.If) and any(
                isinstance(stmt, ast.Raise) and stmt.exc is not None
                and any(word in source.text(stmt.exc) for word in REFUSALS)
                for stmt in node.body)):
            continue
        context = contexts.get(id(node), "?")
        start, end = source.span(node.test)
        text = source.text(node.test)
        yield Mutant(ids(f"condition:{short}:{context}:refusal-skipped"), "condition",
                     source.path, node.lineno, context, f"`if {_flat(text)}: raise` skipped",
                     start, end, f"(({text}) and False)")


#: the calls that remove bytes a paused writer published after their row was removed
CLEANUPS = {"drop_lost", "_delete_late"}


def _cleanup(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """A lost writer's clean-up (``drop_lost``) or the sweeper's late delete after it
    removed the rows (``_delete_late``) skipped: the call replaced by ``asyncio.sleep(0)``,
    so bytes published after their row was gone stay behind for ``reconcile --fix``."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in CLEANUPS):
            context = contexts.get(id(node), "?")
            start, end = source.span(node)
            yield Mutant(ids(f"cleanup:{short}:{context}:skipped"), "cleanup", source.path,
                         node.lineno, context, f"`{_flat(source.text(node))}` skipped",
                         start, end, '__import__("asyncio").sleep(0)')


def _clock(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    return _compares(source, contexts, ids, clock=True)


def _age(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    return _compares(source, contexts, ids, clock=False)


def _group(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    """Group commit's per-run decisions (``protocol/group.py`` and the batches of
    ``transitions``): a lost connection under a batch taken for a refused batch (each run
    sent again alone, as if nothing had applied); a run told to go alone that takes the
    answer as its result; a batch's run without a row of its own given another run's row
    (the compare-and-set it lost taken for won)."""
    short = _short(source.path)
    for node in ast.walk(source.tree):
        context = contexts.get(id(node), "?")
        if isinstance(node, ast.If) and isinstance(node.test, ast.Call) and \
                source.text(node.test.func) in ("connection_lost", "isinstance"):
            start, end = source.span(node.test)
            text = source.text(node.test)
            yield Mutant(ids(f"group:{short}:{context}:never"), "group", source.path,
                         node.lineno, context, f"`if {_flat(text)}` never taken", start, end,
                         f"(({text}) and False)")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "get" and context.endswith("_many"):
            start, end = source.span(node)
            text = source.text(node)
            rows = source.text(node.func.value)
            yield Mutant(ids(f"group:{short}:{context}:another-row"), "group", source.path,
                         node.lineno, context, f"`{_flat(text)}` or another run's row",
                         start, end, f"({text} or next(iter({rows}.values()), None))")


Detector = Callable[[_Source, dict[int, str], _Ids], Iterable[Mutant]]
DETECTORS: dict[str, Detector] = {
    "where": _where, "rowcount": _rowcount, "clock": _clock, "age": _age, "store": _store,
    "recheck": _recheck, "retag": _retag, "rowcount-more": _rowcount_more,
    "store-more": _store_more, "recheck-more": _recheck_more, "tag": _tag,
    "retag-answers": _retag_answers, "integration": _integration, "setting": _setting,
    "expiry": _expiry, "condition": _condition, "group": _group, "cleanup": _cleanup}
SQL = ("where", "rowcount", "rowcount-more", "clock")
#: every module with a fence, and what finds its guards (in this order: a mutant's id counts
#: the guards of its kind, module and function before it, so new ones go after the old)
REGISTRY: list[tuple[str, tuple[str, ...]]] = [
    *((path, ("where", "rowcount", "clock", "retag", "rowcount-more", "recheck-more"))
      for path in TRANSITIONS),
    (SINGLE, ("where", "rowcount", "rowcount-more", "clock")),
    (RETAGGER, ("retag", "retag-answers")),
    (RECONCILER, ("recheck", "age", "tag", "recheck-more")),
    *((path, ("store", "store-more")) for path in STORES),
    # the workers' claims and marks
    ("blobledger/protocol/events.py", SQL),
    ("blobledger/protocol/held.py", SQL),
    ("blobledger/protocol/grace.py", SQL),
    ("blobledger/protocol/variant_steps.py", (*SQL, "recheck-more")),
    ("blobledger/protocol/variant_owner.py", SQL),
    ("blobledger/protocol/owners.py", ("where",)),  # the owner's hold: pointed_at's re-check
    # a bucket is deleted only while it holds no document
    ("blobledger/protocol/buckets.py", ("where", "rowcount")),
    # C3's retag and a lost writer's clean-up; the sweeper's deletion guard and retag
    ("blobledger/protocol/ledger/steps.py", ("tag", "recheck-more", "cleanup")),
    ("blobledger/workers/sweeper/deletion.py", ("tag", "recheck-more", "cleanup")),
    # bytes published after their row was removed: the lost writer's and the sweeper's
    # clean-up (C4 lost with the deferred retag; the sweeper's late delete)
    ("blobledger/protocol/ledger/documents.py", ("cleanup",)),
    ("blobledger/workers/sweeper/__init__.py", ("cleanup",)),
    # the application integrations' attach and detach
    ("blobledger/sqlalchemy.py", ("integration",)),
    ("blobledger/django/signals.py", ("integration",)),
    ("blobledger/django/staging.py", ("integration",)),
    # the settings' safety checks
    ("blobledger/config/settings.py", ("setting",)),
    ("blobledger/config/protocol.py", ("setting",)),
    ("blobledger/django/storage.py", ("setting",)),
    # a signed read URL's or download link's expiry (the disk store's, served by the API)
    ("blobledger/api/links.py", ("expiry",)),
    ("blobledger/s3api/sigv4.py", ("expiry",)),
    # the S3 endpoint's rows: only the parts and metadata of what is gone are forgotten
    ("blobledger/s3api/rows.py", ("where",)),
    # the S3 endpoint's own conditions: If-Match's ETag, a completion's If-None-Match, a
    # DeleteObjects key's ETag, an aws-chunked chunk's signature
    *((f"blobledger/s3api/{room}.py", ("condition",))
      for room in ("writes", "deletes", "chunked")),
    ("blobledger/s3api/multipart.py", ("condition", "cleanup")),
    # a termination lost with its connection is not told success while the upload is open;
    # a completion's publication that applied after its upload was swept is removed
    ("blobledger/uploads/resumable.py", ("condition", "cleanup")),
    # group commit: each run of a batch keeps its own outcome
    ("blobledger/protocol/group.py", ("group",)),
    ("blobledger/protocol/transitions/documents.py", ("group",)),
]


#: guard-shaped code that is no fence, and why: ``"<path under src/>:<function or
#: module-level name>"`` (every shape in it) or ``"...:<shape>"`` (one shape,
#: :mod:`tests.mutate.shapes`). A registered module's mutants in these are not enumerated.
NOT_FENCES: dict[str, str] = {
    "blobledger/protocol/events.py:listing": "`blobledger events`' filters of a listing: "
        "a read shown to an operator, deciding nothing",
    "blobledger/protocol/events.py:find": "`blobledger events show`: one event and its "
        "attempt log, read for an operator",
    "blobledger/protocol/events.py:oldest_pending": "a metric (the oldest pending event's "
        "age), deciding nothing",
    "blobledger/protocol/held.py:state": "the hold's state as the API and CLI show it, "
        "deciding nothing",
    "blobledger/protocol/buckets.py:delete:rowcount": "which refusal a delete of a bucket "
        "reports: the statement's own condition keeps a bucket that holds a document "
        "(where:buckets:delete:documents_table.bucket, killed); a wrong count only misreports",
    "blobledger/protocol/buckets.py:update": "an operator's change of a bucket's settings, "
        "by its name: what it changes is admitted by the next write, guarding no row",
    "blobledger/protocol/held.py:waiting": "a metric (how many documents are held, the "
        "oldest's age), deciding nothing",
    # guard-shaped code outside the registry (tests/mutate/shapes.py) that is no fence
    "blobledger/testing/conformance.py": "the store conformance kit: tests a store's "
        "conditions (run by tests/stores), guards nothing itself",
    "blobledger/workers/doctor/checks.py": "`blobledger doctor` probes whether the storage "
        "honours conditions, on probe blobs of its own; it decides nothing about the ledger",
    "blobledger/workers/doctor/azure.py": "`blobledger doctor`'s Azure probes, on a "
        "container of their own (as doctor/checks.py)",
    "blobledger/experiments/uploads.py": "an experiment measuring which upload "
        "conditions the service honours, on a container of its own",
    "blobledger/experiments/guard.py": "an experiment measuring the service's tag "
        "condition on a delete, on a container of its own",
    "blobledger/api/routes/ops.py:_rows": "the ops page's report (`lease_expired` shown), "
        "deciding nothing",
    "blobledger/cli/put.py:replace_content:condition": "the client sends the caller's "
        "If-Match; the server decides by compare-and-set on the version "
        "(where:transitions:_point_document:documents.version)",
    "blobledger/cli/rm.py:command:condition": "the client sends the caller's If-Match; the "
        "server decides (where:transitions:delete_document:documents.version)",
    "blobledger/client/_core.py:replace:condition": "the If-Match the client sends, as the "
        "caller gave it; the server's compare-and-set on the version decides",
    "blobledger/client/_core.py:delete:condition": "the If-Match the client sends, as the "
        "caller gave it; the server's compare-and-set on the version decides",
    "blobledger/stores/base.py:delete:condition": "the Store API's plumbing of a delete's "
        "condition; the API refuses a delete without one (conformance: "
        "test_a_delete_without_a_condition_is_refused), and each store's request conditions "
        "are enumerated (kind store)",
    "blobledger/protocol/ledger/steps.py:drop_lost:condition": "the Store API refuses a delete "
        "without a condition, so it cannot be dropped; the guard is the re-read of the row "
        "before it (recheck:ledger:drop_lost:ignored)",
    "blobledger/protocol/ledger/steps.py:_abandon:condition": "the Store API refuses a delete "
        "without a condition, so it cannot be dropped; a failed writer deletes its own blob "
        "conditioned on pending, after _abandon's compare-and-set "
        "(where:transitions:_abandon:blobs.attempt)",
    "blobledger/django/staging.py:stage_in_transaction:condition": "the Store API refuses a "
        "delete without a condition; a stager whose savepoint failed deletes its own blob "
        "conditioned on pending (no row of it committed)",
    "blobledger/workers/reconciler.py:orphan:condition": "the orphan's delete condition as "
        "read with it (its ETag); the Store API refuses a delete without one, and the "
        "reconciler's re-checks before it are enumerated (recheck:reconciler:delete_orphan)",
    "blobledger/workers/reconciler.py:delete_orphan:condition": "the Store API refuses a "
        "delete without a condition; the re-checks in front of it are enumerated "
        "(recheck:reconciler:delete_orphan:ignored)",
    "blobledger/s3api/objects.py:put_object:condition": "the client's If-None-Match and "
        "If-Match handed to the S3 endpoint's write: a create only is C1's unique name "
        "(NameTaken: 412), a replace at the matched version R4's compare-and-set on it "
        "(where:transitions:_point_document:documents.version); writes.target compares the "
        "ETag (tests/s3api/test_writes.py::test_if_match_replaces_only_the_version_it_names)",
    "blobledger/s3api/copy.py:copy_object:condition": "the destination's If-None-Match and "
        "If-Match handed to the S3 endpoint's write, as PutObject's (the ledger's C1 and R4 "
        "decide)",
    "blobledger/s3api/multipart.py:_replace:condition": "a completion's If-Match handed to the "
        "S3 endpoint's write, as PutObject's (R4's compare-and-set on the version decides)",
    "blobledger/s3api/rows.py:record_shape": "the upsert of a multipart object's shape on "
        "its pending blob's row (an UPDATE when CreateMultipartUpload wrote the row for its "
        "metadata, an INSERT otherwise; a twin completion's INSERT at the same moment is "
        "retried as the UPDATE): it decides no transition of the protocol (the object "
        "becomes visible at C4, after it)",
    "blobledger/s3api/uploadlists.py:list_multipart_uploads": "ListMultipartUploads: the "
        "open, unexpired uploads shown to a client, deciding nothing (a part or a completion "
        "finds its upload by id and checks it itself)",
    "blobledger/stores/local.py:put:fs": "O_EXCL on a temp file whose name carries a new "
        "uuid4: it only asserts that; the create-only step is os.link (enumerated)",
    "blobledger/stores/local.py:write:fs": "O_EXCL on a part file whose name carries a new "
        "random id: it only asserts that; the parts are published by the create-only put",
    "blobledger/workers/processors/scanner.py:_write:fs": "O_EXCL on the scanner's own temp "
        "file, deciding nothing about the ledger",
    "blobledger/workers/sweeper/__init__.py:exclusive:fs": "the one-sweeper rule on SQLite "
        "spares its single writer; two sweepers are fenced by their claims' compare-and-set, as on "
        "PostgreSQL where they run at once (docs/crash-matrix.md's postgresql columns)",
    "blobledger/config/settings.py:_installed": "an installation check (each feature's extra or "
        "program present), no safety rule",
    "blobledger/_base/extras.py:scan_program_problem": "whether the scan command "
        "names a program that exists: an installation check, no safety rule",
    "blobledger/_base/extras.py:store_problem": "whether a store URL's extra is "
        "installed: an installation check, no safety rule",
    "blobledger/_base/extras.py:database_problem": "whether a database URL's driver is "
        "installed: an installation check, no safety rule",
    "blobledger/config/settings.py:_backends_installed": "an installation check (each backend's "
        "extra present), no safety rule",
    "blobledger/workers/invariants.py:_ready_problem": "`blobledger check`'s report of a "
        "ready row's blob, deciding nothing",
    "blobledger/workers/invariants.py:_attached_problem": "`blobledger check`'s report of "
        "an attached row's blob, deciding nothing",
}


def _fenced(mutant: Mutant) -> bool:
    return f"{mutant.path}:{mutant.context}" not in NOT_FENCES


def _split_from(path: str, paths: Iterable[str]) -> set[str]:
    """The paths of the rooms ``path`` shares a module with (:data:`SPLIT`), itself too."""
    def split(path: str) -> str | None:
        return next((short for room, short in SPLIT.items() if path.startswith(room)), None)

    return {other for other in paths if split(path) is not None and split(other) == split(path)}


def enumerate_mutants(src: Path, *, check: bool = True) -> list[Mutant]:
    """Every mutant of the fences under ``src`` (the ``src/`` folder): each module of
    :data:`REGISTRY` searched by its detectors, in order; ``check``: each applied and parsed
    (it must still be Python)."""
    found: list[Mutant] = []
    ids = _Ids()
    sources = {path: _load(src, path) for path, _ in REGISTRY}
    for source in sources.values():
        source.rooms = [other for other in sources.values() if other is not source
                        and other.path in _split_from(source.path, sources)]
    for path, detectors in REGISTRY:
        source = sources[path]
        contexts = _contexts(source.tree)
        for name in detectors:
            found += filter(_fenced, DETECTORS[name](source, contexts, ids))
    for mutant in found if check else ():  # each must still be Python
        ast.parse(mutant.apply((src / mutant.path).read_bytes()), filename=mutant.path)
    return found
