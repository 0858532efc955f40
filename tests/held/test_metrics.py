"""The processing worker's metrics on ``/metrics`` and its latest run on ``/ops/overview``:
held documents waiting, the oldest one's wait, and the verdicts by outcome."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from blobledger import Ledger
from blobledger.errors import NotFound
from blobledger.protocol.documents import Document
from blobledger.workers.processing import ProcessingWorker
from blobledger.workers.processors import ACCEPT, ProcessorFailed, Reader, Verdict, reject
from tests.api.conftest import client_for
from tests.held.conftest import PNG, LedgerFactory

LEASE_PAST = 700.0  # past the default processing lease (600 s)


async def scrape(client: httpx.AsyncClient) -> dict[tuple[str, str], float]:
    """``/metrics``' processing samples: (sample name, outcome label) -> value."""
    response = await client.get("/metrics")
    assert response.status_code == 200
    return {(sample.name, sample.labels.get("outcome", "")): sample.value
            for family in text_string_to_metric_families(response.text)
            if family.name.startswith("blobledger_processing")
            for sample in family.samples if not sample.name.endswith("_created")}


def verdicts(before: dict[tuple[str, str], float],
             after: dict[tuple[str, str], float]) -> dict[str, float]:
    return {outcome: after[("blobledger_processing_verdicts_total", outcome)]
            - before.get(("blobledger_processing_verdicts_total", outcome), 0.0)
            for outcome in ("accepted", "rejected", "failed", "lost")}


class ByName:
    """A processor deciding by the document's name: ``good`` accepted, ``bad`` rejected,
    ``error`` failing; ``late`` has its claim taken by ``thief`` while it runs."""

    name = "content-type"

    def __init__(self, thief: Ledger | None = None) -> None:
        self.thief = thief

    async def run(self, doc: Document, read: Reader) -> Verdict:
        if doc.name.startswith("error"):
            raise ProcessorFailed("the scanner is away")
        if doc.name.startswith("late"):  # another worker, past the lease, claims the row
            assert self.thief is not None
            _, taken = await self.thief.held.claim(("content-type",), 4, 600)
            assert [w.document_id for w in taken] == [doc.id]
        return reject("not good") if doc.name.startswith("bad") else ACCEPT


async def test_processing_metrics_and_ops(open_ledger: LedgerFactory) -> None:
    async with open_ledger(processing_attempts=1) as ledger, \
            open_ledger(clock_offset=LEASE_PAST) as later, \
            client_for(ledger) as client:
        before = await scrape(client)
        good = await ledger.create("good.png", PNG, content_type="image/png", hold=True)
        for name in ("bad.png", "error.png"):
            await ledger.create(name, PNG, content_type="image/png", hold=True)

        # a worker that runs no processor decides nothing: three held, the oldest waiting
        # as long as its clock is ahead (the lag), and /ops shows that run
        waiting = await ProcessingWorker(later, processors={}).run_once()
        assert (waiting.held, waiting.claimed) == (3, 0)
        assert waiting.lag is not None and LEASE_PAST <= waiting.lag < LEASE_PAST + 60
        seen = await scrape(client)
        assert seen[("blobledger_processing_held", "")] == 3
        assert LEASE_PAST <= seen[("blobledger_processing_lag_seconds", "")] < LEASE_PAST + 60
        overview = (await client.get("/ops/overview")).json()
        assert overview["processing"]["held"] == 3 and overview["processing"]["claimed"] == 0

        report = await ProcessingWorker(ledger, processors={"content-type": ByName()}).run_once()
        assert (report.ready, report.rejected, report.failed) == (1, 2, 1)
        assert (await ledger.get(good.id)).status == "ready"
        after = await scrape(client)
        # the failure, its one attempt allowed, is a rejection too
        assert verdicts(before, after) == {"accepted": 1, "rejected": 2, "failed": 1,
                                           "lost": 0}
        assert after[("blobledger_processing_held", "")] == 0
        assert after[("blobledger_processing_lag_seconds", "")] == 0
        overview = (await client.get("/ops/overview")).json()
        assert overview["processing"]["ready"] == 1 and overview["processing"]["held"] == 0
        assert overview["processing"]["lag"] is None and overview["processing"]["at"] > 0

        late = await ledger.create("late.png", PNG, content_type="image/png", hold=True)
        lost = await ProcessingWorker(
            ledger, processors={"content-type": ByName(thief=later)}).run_once()
        assert (lost.lost, lost.accepted, lost.held) == (1, 0, 1)
        with_lost = await scrape(client)
        assert verdicts(after, with_lost) == {"accepted": 0, "rejected": 0, "failed": 0,
                                              "lost": 1}
        assert with_lost[("blobledger_processing_held", "")] == 1
        try:
            await ledger.get(late.id)
        except NotFound:
            pass  # still held: the lost verdict decided nothing
        else:
            raise AssertionError("a lost verdict made the document ready")
