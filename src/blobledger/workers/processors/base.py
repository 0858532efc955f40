"""What a processor is: a check of a held document's bytes that accepts, rejects, or fails.

A processor must be idempotent: the same bytes give the same verdict, and a run that is
repeated (its worker died or paused past its lease, and another ran it again) changes
nothing outside its verdict, which is recorded once (``protocol/held.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from blobledger.protocol.documents import Document

#: opens the document's bytes: ``read(start, length)`` (None: to the end)
Reader = Callable[[int, "int | None"], AsyncIterator[bytes]]


@dataclass(frozen=True)
class Verdict:
    """A processor's answer: accepted, or rejected with a reason the writer reads."""

    accepted: bool
    reason: str | None = None


ACCEPT = Verdict(True)


def reject(reason: str) -> Verdict:
    return Verdict(False, reason)


class ProcessorFailed(Exception):
    """The processor could not decide (a scanner that errored or timed out): the work is
    tried again later, and rejected after ``processing_attempts`` failures."""


class Processor(Protocol):
    """A named check run on each held document's bytes."""

    name: str

    async def run(self, doc: Document, read: Reader) -> Verdict: ...
