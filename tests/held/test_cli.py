"""The processing worker inside ``blobledger sweep`` (a subprocess) and ``serve``."""

from __future__ import annotations

import json

import pytest

from blobledger.cli.serve import background_workers
from blobledger.config import Settings
from tests.held.conftest import PDF, PNG, LedgerFactory
from tests.sweeper.test_cli import cli


@pytest.mark.parametrize("held_backend", ["sqlite-local"], indirect=True)
async def test_sweep_once_runs_the_processors(open_ledger: LedgerFactory) -> None:
    async with open_ledger() as ledger:
        good = await ledger.create("good.png", PNG, content_type="image/png", hold=True)
        await ledger.create("bad.png", PDF, content_type="image/png", hold=True)
        result = cli(ledger, "sweep", "--once", BLOBLEDGER_PROCESSORS="content-type")
        assert result.returncode == 0, result.stderr
        processed, swept = (json.loads(line) for line in result.stdout.splitlines())
        assert processed["event"] == "processing" and swept["event"] == "sweep"
        assert (processed["ready"], processed["rejected"]) == (1, 1)
        assert swept["deleted"] == 1  # the rejected blob, the grace being 0 here
        assert (await ledger.get(good.id)).status == "ready"
        again = cli(ledger, "sweep", "--once")  # no processors: no processing line
        assert [json.loads(line)["event"] for line in again.stdout.splitlines()] == ["sweep"]


def test_serve_runs_the_processing_worker_when_processors_are_configured() -> None:
    assert len(background_workers(Settings(sweep_interval=0))) == 0
    assert len(background_workers(Settings(processors="content-type",
                                           sweep_interval=0))) == 1
    assert len(background_workers(Settings(processors="content-type"))) == 2
