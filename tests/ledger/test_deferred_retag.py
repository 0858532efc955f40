"""The deferred retag (``BLOBLEDGER_RETAG=deferred``, docs/protocol.md): C4/R4 commit with the
blob still tagged ``pending`` and the retag owed on the row; the retag worker, fenced by claim
token and lease, tags it ``committed`` and records it. On every backend: the ready blob is
never deleted during the lag, a writer whose intent was claimed before C4 loses (no
roll-forward on a claimed row while the blob is ``pending``), a paused worker changes
nothing, the lag is measured and warned about."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
from sqlalchemy import select

from blobledger.errors import ConfigError, IntentLost
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow
from blobledger.stores.azure import AzureStore
from blobledger.workers.invariants import check
from blobledger.workers.lifecycle import check_days
from blobledger.workers.retagger import RETAG_LEASE, Retagger, RetagReport
from blobledger.workers.sweeper import Sweeper
from tests.ledger.test_fencing import (
    outcome,
    read,
    rows,
    stalled_create,
    started,
    stored,
    sweep_past_everything,
)
from tests.support.holds import STEP, Holds
from tests.support.services import ACCOUNT, KEY, Azurite


@pytest.fixture
async def deferred(ledger: Ledger) -> AsyncIterator[Ledger]:
    ledger.settings = ledger.settings.with_(retag="deferred")
    yield ledger


async def owed(ledger: Ledger) -> dict[str, bool]:
    async with ledger.db.session() as session:
        return {name: due is not None for name, due in (await session.execute(
            select(BlobRow.name, BlobRow.retag_due))).all()}


def counted_claims(ledger: Ledger) -> list[int]:
    """The sizes of the retag worker's claims that won rows, as it makes them."""
    claims: list[int] = []
    claim = ledger.transitions.claim_retags

    async def counted(limit: int, lease: float) -> tuple[str, list[str]]:
        token, names = await claim(limit, lease)
        if names:
            claims.append(len(names))
        return token, names

    ledger.transitions.claim_retags = counted  # type: ignore[method-assign]
    return claims


async def retags_drained(ledger: Ledger) -> None:
    """Wait (up to four steps) until no retag is owed; the caller checks what was done."""
    for _ in range(int(4 * STEP / 0.05)):
        if await ledger.transitions.retag_lag() == 0.0:
            return
        await asyncio.sleep(0.05)


async def test_a_create_commits_with_the_retag_owed_and_the_worker_pays_it(
    deferred: Ledger,
) -> None:
    ledger = deferred
    doc = await ledger.create("owed.txt", b"bytes whose retag comes later")
    assert await read(ledger, doc.id) == b"bytes whose retag comes later"
    assert await stored(ledger) == {doc.blob: "pending"}
    assert await owed(ledger) == {doc.blob: True}
    report = await check(ledger)  # I1 in its deferred form: pending while owed
    assert report.ok, report.render()
    # the stale-intent sweep cannot touch it: its row is committed, not pending
    ledger.clock_offset = ledger.settings.sweep_after + 1
    swept = await Sweeper(ledger).run_once()
    assert (swept.retagged, swept.swept) == (1, 0)
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await owed(ledger) == {doc.blob: False}
    assert await ledger.transitions.retag_lag() == 0.0
    settled = await check(ledger, settled=True)
    assert settled.ok, settled.render()


async def test_a_replace_and_a_delete_before_the_retag(deferred: Ledger) -> None:
    """R4 owes the new blob's retag; the old blob, itself still tagged pending, goes through
    the deletion path; a document deleted before its retag loses its blob there too."""
    ledger = deferred
    doc = await ledger.create("twice.txt", b"old")
    new = await ledger.replace(doc.id, b"new", expected_version=1)
    assert await stored(ledger) == {doc.blob: "pending", new.blob: "pending"}
    assert await rows(ledger) == {doc.blob: "deleting", new.blob: "committed"}
    other = await ledger.create("gone.txt", b"gone")
    await ledger.delete(other.id)
    await sweep_past_everything(ledger)
    assert await read(ledger, doc.id) == b"new"
    assert await stored(ledger) == {new.blob: "committed"}
    assert await rows(ledger) == {new.blob: "committed"}
    report = await check(ledger, settled=True)
    assert report.ok, report.render()


async def test_a_sweeper_that_claimed_first_wins_over_c4(
    deferred: Ledger, holds: Holds,
) -> None:
    """The writer is held after its upload past its lease; a sweeper claims the intent and
    is held before deciding; C4 then loses (deferred, no roll-forward on the claimed row: the
    sweeper's delete conditioned on pending would take a ready document's blob); the sweeper
    deletes the pending blob. Nothing acknowledged, nothing left."""
    ledger = deferred
    holds.at("create.after_upload")
    writer = started(lambda: ledger.create("claimed.txt", b"claimed before C4"))
    await holds.wait("create.after_upload")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    holds.at("sweep.after_claim")
    sweeper = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("sweep.after_claim")
    holds.go("create.after_upload")
    result = await outcome(writer)
    assert isinstance(result, IntentLost), result
    holds.go("sweep.after_claim")
    report = await outcome(sweeper)
    assert not isinstance(report, BaseException) and report.swept == 1, report
    assert await stored(ledger) == {}
    assert await rows(ledger) == {}
    settled = await check(ledger, settled=True)
    assert settled.ok, settled.render()


async def test_a_writer_whose_upload_lands_after_the_sweep_removes_its_own_blob(
    deferred: Ledger,
) -> None:
    """Deferred, no confirm runs before C4: a writer stalled mid-upload while the sweeper
    removed its intent (nothing stored yet, so nothing deleted) finishes its upload after
    the sweep, loses C4, and deletes the ``pending`` blob it just wrote, whose row is gone:
    nothing is left for ``reconcile --fix``."""
    ledger = deferred
    writer, gate = await stalled_create(ledger, "late.txt")
    ledger.clock_offset = ledger.settings.sweep_after + 1
    report = await Sweeper(ledger).run_once()
    assert report.swept == 1
    assert await rows(ledger) == {}
    gate.set()
    result = await outcome(writer)
    assert isinstance(result, IntentLost), result
    assert await stored(ledger) == {}
    settled = await check(ledger, settled=True)
    assert settled.ok, settled.render()


async def test_a_paused_retag_worker_changes_nothing_when_it_wakes(
    deferred: Ledger, holds: Holds,
) -> None:
    """Worker A claims and is held; its lease runs out; worker B claims, retags, records;
    the document is deleted and its blob goes; A wakes: its retag finds nothing pending and
    its record loses."""
    ledger = deferred
    doc = await ledger.create("slow.txt", b"retagged by the second worker")
    holds.at("retag.after_claim")
    first = started(lambda: Retagger(ledger).run_once())
    await holds.wait("retag.after_claim")
    ledger.clock_offset = 3600  # A's lease long gone
    second = await Retagger(ledger).run_once()
    assert second.retagged == 1
    assert await stored(ledger) == {doc.blob: "committed"}
    await ledger.delete(doc.id)
    for _ in range(2):  # the deletion path, past the grace on this later clock
        ledger.clock_offset += ledger.settings.delete_grace + 1
        await Sweeper(ledger).run_once()
    assert await stored(ledger) == {}
    holds.go("retag.after_claim")
    late = await outcome(first)
    assert not isinstance(late, BaseException), late
    assert (late.retagged, late.moved_on) == (0, 1), late
    assert await stored(ledger) == {} and await rows(ledger) == {}


async def test_a_late_worker_never_takes_a_blob_back_from_deleting(
    deferred: Ledger, holds: Holds,
) -> None:
    """Worker A claims and is held past its lease; worker B retags and records; the
    document is deleted and the deletion path is held after tagging the blob ``deleting``;
    A wakes: its retag is conditioned on ``pending``, so the blob stays ``deleting`` (tags
    never go backwards) and A records nothing; the deletion path then deletes it."""
    ledger = deferred
    doc = await ledger.create("deleted-after-its-retag.txt", b"y")
    holds.at("retag.after_claim")
    worker = started(lambda: Retagger(ledger).run_once())
    await holds.wait("retag.after_claim")
    ledger.clock_offset = 3600
    assert (await Retagger(ledger).run_once()).retagged == 1
    await ledger.delete(doc.id)
    ledger.clock_offset += ledger.settings.delete_grace + 1
    holds.at("deletion.after_tag")
    deletion = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("deletion.after_tag")
    assert await stored(ledger) == {doc.blob: "deleting"}
    holds.go("retag.after_claim")
    late = await outcome(worker)
    assert not isinstance(late, BaseException), late
    assert (late.retagged, late.moved_on, late.lost) == (0, 1, 0), late
    assert await stored(ledger) == {doc.blob: "deleting"}
    holds.go("deletion.after_tag")
    report = await outcome(deletion)
    assert not isinstance(report, BaseException) and report.deleted == 1, report
    assert await stored(ledger) == {} and await rows(ledger) == {}


async def test_a_late_retag_against_the_deletion_path_converges(
    deferred: Ledger, holds: Holds,
) -> None:
    """The race the protocol allows: worker A claims and is held; the document is deleted
    and the deletion path, finding the blob still ``pending``, is held before its delete; A
    retags it ``committed`` (its condition holds) and its record loses; the deletion path's
    delete conditioned on ``pending`` is refused; its next run retags and deletes."""
    ledger = deferred
    doc = await ledger.create("deleted-before-its-retag.txt", b"z")
    holds.at("retag.after_claim")
    worker = started(lambda: Retagger(ledger).run_once())
    await holds.wait("retag.after_claim")
    await ledger.delete(doc.id)
    ledger.clock_offset = ledger.settings.delete_grace + 1
    holds.at("deletion.after_tag")
    deletion = started(lambda: Sweeper(ledger).run_once())
    await holds.wait("deletion.after_tag")
    holds.go("retag.after_claim")
    late = await outcome(worker)
    assert not isinstance(late, BaseException) and (late.retagged, late.lost) == (0, 1), late
    holds.go("deletion.after_tag")
    refused = await outcome(deletion)
    assert not isinstance(refused, BaseException) and refused.refused == 1, refused
    assert await stored(ledger) == {doc.blob: "committed"}
    assert await rows(ledger) == {doc.blob: "deleting"}
    ledger.clock_offset += 3600  # past the deletion path's lease on its claim
    again = await Sweeper(ledger).run_once()
    assert again.deleted == 1, again
    assert await stored(ledger) == {} and await rows(ledger) == {}


async def test_a_worker_held_after_its_retag_loses_its_record_to_a_later_claim(
    deferred: Ledger, holds: Holds,
) -> None:
    ledger = deferred
    doc = await ledger.create("twice-claimed.txt", b"x")
    holds.at("retag.after_tag")
    first = started(lambda: Retagger(ledger).run_once())
    await holds.wait("retag.after_tag")
    assert await stored(ledger) == {doc.blob: "committed"} and await owed(ledger) == {
        doc.blob: True}
    ledger.clock_offset = 3600
    second = await Retagger(ledger).run_once()  # finds it committed already: records
    assert second.retagged == 1
    holds.go("retag.after_tag")
    late = await outcome(first)
    assert not isinstance(late, BaseException) and (late.retagged, late.lost) == (0, 1), late
    assert await owed(ledger) == {doc.blob: False}


async def test_the_lag_is_measured_and_warned_about(deferred: Ledger) -> None:
    """Only committed rows owe a retag: a document deleted before its retag is the deletion
    path's (its row keeps the stamp, and counts for nothing)."""
    ledger = deferred
    gone = await ledger.create("deleted.txt", b"deleted before its retag")
    await ledger.delete(gone.id)
    ledger.clock_offset = ledger.settings.retag_warn_after + 30
    assert await ledger.transitions.retag_lag() == 0.0
    assert await Retagger(ledger).run_once() == RetagReport()  # nothing claimable either
    ledger.clock_offset = 0.0
    await ledger.create("lagging.txt", b"nobody retags me yet")
    ledger.clock_offset = ledger.settings.retag_warn_after + 30
    lag = await ledger.transitions.retag_lag()
    assert lag > ledger.settings.retag_warn_after
    report = await check(ledger)
    assert report.ok and report.retag_lag > ledger.settings.retag_warn_after
    assert any("owed retag" in w for w in report.warnings), report.render()
    await Retagger(ledger).run_once()
    assert not (await check(ledger)).warnings


async def test_serve_s_worker_is_woken_by_c4(deferred: Ledger) -> None:
    from blobledger.workers.retagger import retag_forever

    ledger = deferred
    stop = asyncio.Event()
    worker = asyncio.create_task(retag_forever(ledger, interval=3600, stop=stop))
    try:
        doc = await ledger.create("woken.txt", b"retagged at once")
        for _ in range(int(STEP / 0.02)):  # the store's tag, polled
            if (await stored(ledger)).get(doc.blob) == "committed":
                break
            await asyncio.sleep(0.02)
        assert (await stored(ledger)).get(doc.blob) == "committed"
    finally:
        stop.set()
        await asyncio.wait_for(worker, STEP)


async def test_a_burst_of_creates_is_claimed_together(deferred: Ledger) -> None:
    """The worker woken by a C4 lingers before it claims: the retags a burst of creates
    owes are claimed (and recorded) in a batch or two, not one claim per create."""
    from blobledger.workers.retagger import retag_forever

    ledger = deferred
    claims = counted_claims(ledger)
    stop = asyncio.Event()
    worker = asyncio.create_task(retag_forever(ledger, interval=3600, stop=stop, linger=1.0))
    try:
        docs = await asyncio.gather(*(ledger.create(f"burst-{n}.txt", b"b") for n in range(8)))
        await retags_drained(ledger)
        assert await stored(ledger) == {d.blob: "committed" for d in docs}
        assert sum(claims) == 8 and len(claims) <= 3, claims
    finally:
        stop.set()
        await asyncio.wait_for(worker, STEP)


async def test_a_trickle_of_creates_is_claimed_together_at_the_default_linger(
        deferred: Ledger) -> None:
    """``serve``'s worker (the default linger) woken by creates one every 50 ms claims
    them in one batch or two, not a claim (and a record, and a lag reading) per few
    creates: each batch's transactions are CPU the writers beside it share."""
    from blobledger.workers.retagger import retag_forever

    ledger = deferred
    claims = counted_claims(ledger)
    stop = asyncio.Event()
    worker = asyncio.create_task(retag_forever(ledger, interval=3600, stop=stop))
    try:
        docs = []
        for n in range(8):
            docs.append(await ledger.create(f"trickle-{n}.txt", b"t"))
            await asyncio.sleep(0.05)
        await retags_drained(ledger)
        assert await stored(ledger) == {d.blob: "committed" for d in docs}
        assert sum(claims) == 8 and len(claims) <= 2, claims
    finally:
        stop.set()
        await asyncio.wait_for(worker, STEP)


async def test_a_stop_ends_the_worker_s_linger_at_once(deferred: Ledger) -> None:
    """A worker lingering after a C4 (the rest of a burst to join its claim) stops when
    told, not after the linger: ``serve`` does not wait for it to end."""
    from blobledger.workers.retagger import retag_forever

    ledger = deferred
    stop = asyncio.Event()
    worker = asyncio.create_task(retag_forever(ledger, interval=3600, stop=stop,
                                               linger=3600))
    await asyncio.sleep(0.2)  # its first run done: waiting to be woken
    await ledger.create("lingered.txt", b"owes its retag")
    await asyncio.sleep(0.2)  # woken: lingering
    stop.set()
    await asyncio.wait_for(worker, STEP)


def test_the_lifecycle_rule_must_be_far_beyond_the_warned_lag() -> None:
    check_days(1, sweep_after=7200, retag_warn_after=300)
    with pytest.raises(ConfigError, match="RETAG_WARN_AFTER"):
        check_days(1, sweep_after=7200, retag_warn_after=3600)


async def test_a_claim_reads_only_owed_retags(deferred: Ledger) -> None:
    """Committed rows that owe nothing (made inline, or already retagged) never fill a
    claim's batch ahead of an owed retag (SQLite sorts NULL first)."""
    ledger = deferred
    ledger.settings = ledger.settings.with_(retag="inline")
    await ledger.create("inline.txt", b"tagged committed on the writer's path")
    ledger.settings = ledger.settings.with_(retag="deferred")
    doc = await ledger.create("owed.txt", b"owes its retag")
    report = await Retagger(ledger, batch=1).run_once()
    assert report.retagged == 1, report
    assert (await stored(ledger))[doc.blob] == "committed"


async def test_a_claim_skips_rows_deleted_or_claimed_by_another_worker(
    deferred: Ledger, holds: Holds,
) -> None:
    """An owed retag is claimable while rows ahead of it in age are not: one whose document
    was deleted (the deletion path's now), one another worker holds (its lease runs)."""
    ledger = deferred
    gone = await ledger.create("deleted.txt", b"deleted before its retag")
    await ledger.delete(gone.id)
    held = await ledger.create("held.txt", b"claimed by a paused worker")
    free = await ledger.create("free.txt", b"claimable")
    holds.at("retag.after_claim")
    paused = started(lambda: Retagger(ledger, batch=1).run_once())
    await holds.wait("retag.after_claim")
    report = await Retagger(ledger, batch=1).run_once()
    assert report.retagged == 1, report
    tags = await stored(ledger)
    assert (tags[held.blob], tags[free.blob]) == ("pending", "committed"), tags
    holds.go("retag.after_claim")
    late = await outcome(paused)
    assert not isinstance(late, BaseException) and late.retagged == 1, late
    assert (await stored(ledger))[held.blob] == "committed"


async def test_a_retag_not_done_is_not_recorded(deferred: Ledger) -> None:
    """In one claimed batch, a blob the worker could not tag ``committed`` (here tagged
    otherwise behind the ledger's back) keeps its owed marker; the other is recorded."""
    ledger = deferred
    odd = await ledger.create("odd.txt", b"tagged behind the ledger's back")
    fine = await ledger.create("fine.txt", b"retagged")
    await ledger.store.set_tags(odd.blob, {"state": "elsewhere"})
    report = await Retagger(ledger).run_once()
    assert (report.retagged, report.moved_on) == (1, 1), report
    assert await owed(ledger) == {odd.blob: True, fine.blob: False}


@pytest.mark.parametrize("backend", ["sqlite-azure"])
async def test_a_tag_write_the_store_refuses_stays_owed_until_a_later_run_pays_it(
    deferred: Ledger, azurite: Azurite,
) -> None:
    """Schedule: C4 committed a ready document whose blob is still ``pending``; the retag
    worker runs with a credential the service refuses tag writes to (a container SAS without
    the ``t`` permission: a real 403 from Azurite). Its retag failed, so it is not recorded:
    the retag stays owed (nothing else would ever retag the blob, and the lifecycle rule
    deletes ``pending`` blobs) and a later run, past the claim's lease and with a credential
    that may tag, retags it ``committed``."""
    ledger = deferred
    doc = await ledger.create("refused.txt", b"a retag the service refuses at first")
    assert isinstance(ledger.store, AzureStore)
    container = ledger.store.container_name
    sas = generate_container_sas(
        ACCOUNT, container, account_key=KEY, expiry=datetime.now(UTC) + timedelta(hours=1),
        permission=ContainerSasPermissions(read=True, write=True, create=True, delete=True,
                                           list=True))
    untagging = AzureStore(container, connection_string=(
        f"BlobEndpoint=http://127.0.0.1:{azurite.port}/{ACCOUNT};SharedAccessSignature={sas}"))
    async with untagging:
        refused = Ledger(ledger.db, untagging, ledger.settings, migrate=False,
                         clock_offset=ledger.clock_offset)
        report = await Retagger(refused).run_once()
    assert (report.retagged, report.errors) == (0, 1), report
    assert await owed(ledger) == {doc.blob: True}
    assert await stored(ledger) == {doc.blob: "pending"}
    ledger.clock_offset += RETAG_LEASE + 1
    report = await Retagger(ledger).run_once()
    assert (report.retagged, report.errors) == (1, 0), report
    assert await owed(ledger) == {doc.blob: False}
    assert await stored(ledger) == {doc.blob: "committed"}
    settled = await check(ledger, settled=True)
    assert settled.ok, settled.render()
