"""The writers of :mod:`tests.dj.explore`: a Django save on a thread of its own that stops
at every step (the integration's failpoints, and a step after a field's staging) until
the explorer resumes it, or crashes it there."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from blobledger.django import signals, staging
from blobledger.django.storage import LedgerStorage


class Crash(BaseException):
    """A writer killed at a step (not an Exception: nothing on the way may handle it)."""


class RolledBack(Exception):
    """The application rolls its transaction back after the save."""


@dataclass(eq=False)
class Writer:
    """One Django writer on a thread of its own, stopping at every step."""

    n: int
    kind: str
    pk: int | None  # the row (None: a create, until it has one)
    data: bytes = b""
    how: str = "alone"  # alone | long | rollback
    began_at: float = 0.0  # the sweeper's offset when it started
    started: float = field(default_factory=time.monotonic)  # the real clock at its start
    swept_age: float = 0.0  # the oldest its staging looked to a sweep since it started
    loaded: str | None = None  # the file name its instance loaded
    staged: list[str] = field(default_factory=list)
    points: list[str] = field(default_factory=list)
    point: str | None = None
    crash: bool = False
    done: bool = False
    judged: bool = False
    error: BaseException | None = None
    thread: threading.Thread | None = None
    arrived: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)

    def label(self) -> str:
        row = "new row" if self.kind == "create" else f"row {self.pk}"
        return f"w{self.n} {self.kind}({row}, {self.how})"

    def stop(self, point: str) -> None:
        """On the writer's thread: stop at ``point`` until resumed (or crashed)."""
        self.point = point
        self.points.append(point)
        self.arrived.set()
        self.go.wait()
        self.go.clear()
        self.point = None
        if self.crash:
            raise Crash(point)

    def resume(self, *, crash: bool = False) -> None:
        self.crash = crash
        self.arrived.clear()
        self.go.set()

    def settled(self, timeout: float) -> bool:
        """Wait until it stops at a step or ends (False: still running, or waiting)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.done or self.arrived.is_set():
                return True
            self.arrived.wait(0.02)
        return self.done or self.arrived.is_set()


#: the writer running on each thread
BY_THREAD: dict[int, Writer] = {}


def step(point: str) -> None:
    writer = BY_THREAD.get(threading.get_ident())
    if writer is not None:
        writer.stop(point)


@contextlib.contextmanager
def stepping() -> Iterator[None]:
    """The integration's failpoints, and a step after a field's staging, stop writers."""
    original_stage = LedgerStorage.stage
    original = (getattr(signals, "failpoint"), getattr(staging, "failpoint"))  # noqa: B009

    def stage(self: LedgerStorage, *args: Any, **kwargs: Any) -> Any:
        staged = original_stage(self, *args, **kwargs)
        writer = BY_THREAD.get(threading.get_ident())
        if writer is not None:
            writer.staged.append(staged.name)
        step("explore.after_stage")
        return staged

    LedgerStorage.stage = stage  # type: ignore[method-assign]
    for module in (signals, staging):
        setattr(module, "failpoint", step)  # noqa: B010 - not exported: patched here
    try:
        yield
    finally:
        LedgerStorage.stage = original_stage  # type: ignore[method-assign]
        for module, found in zip((signals, staging), original, strict=True):
            setattr(module, "failpoint", found)  # noqa: B010
