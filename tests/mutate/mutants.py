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
  always "done", and C4's refusal (deferred) to roll forward on a claimed row dropped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: the files whose fences are mutated, relative to ``src/``
TRANSITIONS = "blobledger/protocol/transitions.py"
#: C1 and C4 as one statement each (their own joins of the transitions' statements)
SINGLE = "blobledger/protocol/single.py"
RECONCILER = "blobledger/workers/reconciler.py"
RETAGGER = "blobledger/workers/retagger.py"
STORES = ("blobledger/stores/local.py", "blobledger/stores/azure/store.py",
          "blobledger/stores/s3/store.py")
KINDS = ("where", "read", "rowcount", "lease", "store", "recheck", "retag")

#: the database clock's bound times in ``transitions`` (a comparison with one is a lease or age)
CLOCK = {"NOW", "LEASE", "CUTOFF", "EXPIRES"}
#: names of an age in the reconciler
AGE = re.compile(r"age|older_than|deadline|cutoff")
#: the storage services' calls that delete or retag, and the keywords that condition them
SERVICE_CALLS = {"delete_blob", "delete_blobs", "delete_object", "set_blob_tags"}
CONDITION_KEYWORDS = {"if_tags_match_condition", "IfMatch", "etag", "match_condition"}
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


def _short(path: str) -> str:
    """A mutant id's module part: the path under the package without its layer folder
    (``protocol/transitions.py`` is ``transitions``), so the ids outlive a move."""
    short = path.removeprefix("blobledger/").removesuffix(".py")
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
    tuples = {node.targets[0].id: [source.text(e) for e in node.value.elts]
              for node in source.tree.body
              if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Tuple)}
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


def _rowcount(source: _Source, contexts: dict[int, str], ids: _Ids) -> Iterator[Mutant]:
    short = _short(source.path)
    for node in ast.walk(source.tree):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Eq | ast.NotEq)
                and isinstance(node.left, ast.Call) and isinstance(node.left.func, ast.Name)
                and (node.left.func.id == "_count" or (
                    node.left.func.id == "len" and isinstance(node.comparators[0], ast.Constant)))):
            context = contexts.get(id(node), "?")
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


def _load(src: Path, path: str) -> _Source:
    data = (src / path).read_bytes()
    return _Source(path, data, ast.parse(data, filename=path))


def enumerate_mutants(src: Path) -> list[Mutant]:
    """Every mutant of the fences under ``src`` (the ``src/`` folder), in file order."""
    found: list[Mutant] = []
    ids = _Ids()
    transitions = _load(src, TRANSITIONS)
    contexts = _contexts(transitions.tree)
    found += _where(transitions, contexts, ids)
    found += _rowcount(transitions, contexts, ids)
    found += _compares(transitions, contexts, ids, clock=True)
    found += _retag(transitions, contexts, ids)
    single = _load(src, SINGLE)
    found += _where(single, _contexts(single.tree), ids)
    retagger = _load(src, RETAGGER)
    found += _retag(retagger, _contexts(retagger.tree), ids)
    reconciler = _load(src, RECONCILER)
    contexts = _contexts(reconciler.tree)
    found += _recheck(reconciler, contexts, ids)
    found += _compares(reconciler, contexts, ids, clock=False)
    for path in STORES:
        store = _load(src, path)
        found += _store(store, _contexts(store.tree), ids)
    for mutant in found:  # each must still be Python
        ast.parse(mutant.apply((src / mutant.path).read_bytes()), filename=mutant.path)
    return found
