"""Guard-shaped code anywhere under ``src/``, found independently of :data:`REGISTRY
<tests.mutate.mutants.REGISTRY>`: what a fence looks like, wherever it was written. Every
site must lie under a mutant ``scripts/mutate`` enumerates, or be named in
:data:`NOT_FENCES <tests.mutate.mutants.NOT_FENCES>` with the reason it is none
(``tests/mutate/test_mutants.py``), so that no fence is built beside the proof.

Shapes:

- ``where``: a ``.where(...)`` of an ``update`` or ``delete`` (a compare-and-set);
- ``claim``: a ``.where(...)`` of a ``select`` that compares with the database's clock, or a
  ``select ... with_for_update`` (a claim's candidates, a lock before a decision);
- ``clock``: a comparison with the database's clock (``NOW``, ``LEASE``, ``CUTOFF``, ...);
- ``condition``: a store request's condition (``if_tags=``, ``IfMatch=``, ``IfNoneMatch=``,
  ``match_condition=``, ``**CREATE_ONLY``, an ``If-None-Match`` header, ...);
- ``refusal``: ``if ...: raise ConditionNotMet`` (a store's own check);
- ``fs``: the local disk's ``flock``, create-only ``os.link``, ``O_EXCL``, an inode check;
- ``rowcount``: a statement's result count compared (``rowcount``, ``_count(...)``);
- ``lapse``: a Python-level comparison of a lease, lapse or expiry;
- ``integration``: an application integration's attach or detach call;
- ``setting``: a settings validator (``@model_validator``) or a ``*_problem`` check.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.mutate.mutants import (
    CLOCK,
    CONDITION_KEYS,
    CONDITION_KEYWORDS,
    INTEGRATION_CALLS,
    NOT_FENCES,
    SERVICE_CALLS,
    _contexts,
    _Source,
    _statement,
    enumerate_mutants,
)

#: keyword arguments that condition a store request, at any layer (the ``Store`` API's too)
CONDITIONS = CONDITION_KEYWORDS | {"if_tags", "if_etag", "if_match"}
#: ``**NAME`` arguments that condition a request
CONDITION_SPREADS = re.compile(r"CREATE_ONLY|_delete_options")
LAPSE = re.compile(r"lease|lapse|expir", re.IGNORECASE)
#: calls whose ``etag=`` is a condition (elsewhere it is a blob's description: ``BlobInfo``)
ETAG_CALLS = SERVICE_CALLS | {"Condition"}


@dataclass(frozen=True)
class Site:
    """One piece of guard-shaped code: bytes ``start:end`` of ``path`` (under ``src/``)."""

    path: str
    line: int
    context: str
    shape: str
    start: int
    end: int
    text: str

    @property
    def key(self) -> str:
        return f"{self.path}:{self.context}:{self.shape}"

    def excused_by(self, not_fences: dict[str, str]) -> str | None:
        for key in (self.path, f"{self.path}:{self.context}", self.key):
            if key in not_fences:
                return not_fences[key]
        return None


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else None)


def _shape(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "where":
            statement = _statement(node)
            if statement in {"update", "delete"}:
                return "where"
            if statement == "select" and any(
                    isinstance(n, ast.Name) and n.id in CLOCK
                    for arg in node.args for n in ast.walk(arg)):
                return "claim"
        if node.func.attr == "with_for_update":
            return "claim"
        if node.func.attr in {"flock", "link"} and _name(node.func.value) in {"fcntl", "os"}:
            return "fs"
    if isinstance(node, ast.Call) and any(
            (k.arg in CONDITIONS and (k.arg != "etag" or _name(node.func) in ETAG_CALLS))
            or (k.arg is None and CONDITION_SPREADS.search(ast.unparse(k.value)))
            for k in node.keywords):
        return "condition"
    if isinstance(node, ast.Call) and _name(node.func) in INTEGRATION_CALLS:
        return "integration"
    if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value in CONDITION_KEYS for k in node.keys):
        return "condition"
    if isinstance(node, ast.Attribute) and node.attr == "O_EXCL":
        return "fs"
    if isinstance(node, ast.If) and any(
            isinstance(s, ast.Raise) and isinstance(s.exc, ast.Call)
            and _name(s.exc.func) == "ConditionNotMet" for s in node.body):
        return "refusal"
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        names = {n.id for side in sides for n in ast.walk(side) if isinstance(n, ast.Name)}
        attrs = {n.attr for side in sides for n in ast.walk(side)
                 if isinstance(n, ast.Attribute)}
        if names & CLOCK:
            return "clock"
        if "st_ino" in attrs:
            return "fs"
        if "rowcount" in ast.unparse(node) or "_count" in names or "_rowcount" in names:
            return "rowcount"
        if not isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.Is | ast.IsNot | ast.In
                          | ast.NotIn) and any(LAPSE.search(n) for n in names | attrs):
            return "lapse"
    if isinstance(node, ast.Attribute) and node.attr == "lapsed":
        return "lapse"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.name.endswith("_problem") or any(
                isinstance(d, ast.Call) and _name(d.func) == "model_validator"
                for d in node.decorator_list)):
        return "setting"
    return None


def sites(src: Path) -> Iterator[Site]:
    """Every guard-shaped site in every module under ``src`` (the ``src/`` folder)."""
    for file in sorted(src.rglob("*.py")):
        path = file.relative_to(src).as_posix()
        data = file.read_bytes()
        source = _Source(path, data, ast.parse(data, filename=path))
        contexts = _contexts(source.tree)
        for node in ast.walk(source.tree):
            shape = _shape(node)
            if shape is None:
                continue
            context = node.name if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                else contexts.get(id(node), "?")
            start, end = source.span(node)
            yield Site(path, node.lineno, context, shape, start, end,  # type: ignore[attr-defined]
                       " ".join(source.text(node).split())[:100])


def unenumerated(src: Path) -> list[Site]:
    """The guard-shaped sites under ``src`` that no enumerated mutant touches and that
    :data:`NOT_FENCES` does not name: each is a fence beside the proof."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for mutant in enumerate_mutants(src, check=False):
        spans.setdefault(mutant.path, []).append((mutant.start, mutant.end))
    return [site for site in sites(src)
            if not any(start < site.end and site.start < end
                       for start, end in spans.get(site.path, []))
            and site.excused_by(NOT_FENCES) is None]
