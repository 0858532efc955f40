"""Failpoints in-process: the hook sees every point in order, in the task that reached it;
without actions or a hook nothing is watched."""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blobledger import failpoints


async def _two_chunks() -> AsyncIterator[bytes]:
    yield b"a"
    yield b"b"


async def test_hook_sees_every_point_before_the_action() -> None:
    seen: list[str] = []

    async def hook(point: str) -> None:
        seen.append(point)

    failpoints.set_hook(hook)
    try:
        failpoints.configure("create.after_tag=raise")  # configure keeps the hook
        await failpoints.hit("create.after_insert")
        chunks = [c async for c in failpoints.stream(_two_chunks(), "put.mid_stream")]
        with pytest.raises(failpoints.FailpointError):
            await failpoints.hit("create.after_tag")
    finally:
        failpoints.configure("")
        failpoints.set_hook(None)
    assert chunks == [b"a", b"b"]
    assert seen == ["create.after_insert", "put.mid_stream", "put.mid_stream",
                    "create.after_tag"]


async def test_nothing_configured_means_nothing_watched() -> None:
    failpoints.configure("")
    failpoints.set_hook(None)
    assert not failpoints._ACTIVE
    data = _two_chunks()
    assert failpoints.stream(data, "put.mid_stream") is data
    await failpoints.hit("create.after_insert")  # no action, no hook: returns


# -- the list of points in blobledger/failpoints.py is the list of points the sources hit --

_SOURCES = Path(failpoints.__file__).parent
#: a documented point: a dotted name in double backquotes, braces for alternatives
_DOCUMENTED = re.compile(r"``([a-z_{},]+(?:\.[a-z_{},]+)+)``")


def _expand(pattern: str) -> set[str]:
    """``a.{b,c}`` -> ``{"a.b", "a.c"}``."""
    found = re.search(r"\{([^{}]*)\}", pattern)
    if found is None:
        return {pattern}
    return set().union(*(_expand(pattern[:found.start()] + option + pattern[found.end():])
                         for option in found.group(1).split(",")))


def _documented() -> set[str]:
    text = failpoints.__doc__ or ""
    return set().union(*(_expand(match) for match in _DOCUMENTED.findall(text)))


def _hit_in_sources() -> tuple[set[str], set[str]]:
    """The points named where ``failpoints.hit``, ``failpoints.stream`` or the Django
    integration's ``failpoint`` is called: literal names, and f-string templates with
    ``*`` for each replacement field."""
    literal: set[str] = set()
    templates: set[str] = set()
    for path in _SOURCES.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = (node.func.attr if isinstance(node.func, ast.Attribute)
                    else node.func.id if isinstance(node.func, ast.Name) else "")
            if name not in ("hit", "stream", "failpoint"):
                continue
            arg = node.args[-1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                literal.add(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                templates.add("".join(str(part.value) if isinstance(part, ast.Constant) else "*"
                                      for part in arg.values))
    return literal, templates


def test_every_failpoint_is_documented_once_and_exists() -> None:
    documented = _documented()
    literal, templates = _hit_in_sources()
    assert "create.after_insert" in literal and "put.mid_stream" in literal  # the scan works
    assert "django.after_attach" in literal and "*.after_create" in templates
    assert not literal - documented, "hit in the sources, missing from failpoints.py's list"
    for template in templates:
        assert any(fnmatch.fnmatchcase(point, template) for point in documented), template
    stale = {point for point in documented - literal
             if not any(fnmatch.fnmatchcase(point, t) for t in templates)}
    assert not stale, "documented in failpoints.py, hit nowhere"
