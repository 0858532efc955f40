"""The explorer of Django's writers (:mod:`tests.dj.explore`) in the suite, time-bounded:
at most about 30 s per database (12 s of batches of two examples), and its scripted interleavings on
each (``scripts/explore --django --minutes N`` runs it longer)."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.dj.explore import STATS, DjangoExplorer, explore
from tests.dj.explore_cases import SCENARIOS, replay

SECONDS = float(os.environ.get("BLOBLEDGER_DJANGO_EXPLORE_SECONDS", "12"))
SHRINK = int(os.environ.get("BLOBLEDGER_DJANGO_EXPLORE_SHRINK", "60"))
DATABASES = pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"],
                                    indirect=True)


@DATABASES
def test_djangos_writers_interleaved_with_the_resolvers_ahead(backend: str) -> None:
    before = (STATS.examples, STATS.steps, STATS.writers, STATS.refused, STATS.crashed)
    explore(seconds=SECONDS, batch=2, steps=25, shrink_seconds=SHRINK)
    examples, steps, writers, refused, crashed = (
        now - then for now, then in zip((STATS.examples, STATS.steps, STATS.writers,
                                         STATS.refused, STATS.crashed), before, strict=True))
    assert examples >= 2  # at least one whole batch ran
    print(f"\n{backend}: {examples} examples, {steps} checked steps, {writers} writers "
          f"({refused} refused as stale, {crashed} crashed)")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
@DATABASES
def test_a_known_interleaving_of_djangos_writers(
        backend: str, scenario: Callable[[DjangoExplorer], None]) -> None:
    replay(scenario)
