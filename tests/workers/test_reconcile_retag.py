"""``reconcile --fix`` and the deferred retag: a ready document's blob found ``pending`` (its
C3/R3 owed, the retag worker dead) is retagged ``committed`` conditioned on ``pending``,
after the row is read again; a row that moved on since the listing keeps its tag. A
replaced or deleted document's old blob is awaiting deletion, not a mismatch."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from blobledger import Ledger
from blobledger.protocol.models import BlobRow, as_utc
from blobledger.stores.base import BlobInfo
from blobledger.workers.reconciler import _Merge, _Row, reconcile
from blobledger.workers.retagger import Retagger
from blobledger.workers.sweeper import Sweeper
from tests.ledger.test_fencing import outcome, started
from tests.support.holds import Holds

pytestmark = pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-local"],
                                     indirect=True)


def deferred(ledger: Ledger) -> Ledger:
    """The fixture's database and store, with the deferred retag and no retag worker."""
    return Ledger(ledger.db, ledger.store, ledger.settings.with_(retag="deferred"))


async def tag_of(ledger: Ledger, name: str) -> str | None:
    return (await ledger.store.get_tags(name)).get("state")


async def listed(ledger: Ledger, name: str) -> BlobInfo:
    return next(b for b in [b async for b in ledger.store.list("", tags=True)]
                if b.name == name)


async def test_fix_retags_a_ready_documents_pending_blob(ledger: Ledger) -> None:
    writer = deferred(ledger)
    doc = await writer.create("owed.txt", b"owed", content_type="text/plain")
    assert await tag_of(ledger, doc.blob) == "pending"  # C3 owed: no worker ran
    report = await reconcile(ledger, fix=True, older_than=180, blocks=False)
    assert (report.mismatch, report.fixed) == (1, 1), report.as_dict()
    assert report.findings[0].fixed
    assert await tag_of(ledger, doc.blob) == "committed"
    assert (await reconcile(ledger, fix=False, older_than=180, blocks=False)).total == 0


async def test_fix_leaves_the_tag_of_a_row_that_moved_on_since_the_listing(
        ledger: Ledger) -> None:
    """The fence: the row is read again before the retag. Listed as a ready document's,
    then the document was deleted (its row ``deleting``): the blob keeps ``pending``."""
    writer = deferred(ledger)
    doc = await writer.create("gone.txt", b"gone", content_type="text/plain")
    async with ledger.db.session() as session:
        row = (await session.execute(select(BlobRow).where(
            BlobRow.name == doc.blob))).scalar_one()
        snapshot = _Row(row.name, row.state, row.changed_at, True)  # what the pages read
    blob = await listed(ledger, doc.blob)
    await writer.delete(doc.id)  # after the listing, before the fix
    merge = _Merge(ledger, fix=True, older_than=0, on_finding=None)
    merge.now = as_utc(await ledger.now())
    await merge.compare(snapshot, blob)
    assert merge.report.fixed == 0
    assert await tag_of(ledger, doc.blob) == "pending"


async def test_fix_refuses_a_blob_the_deletion_path_tagged_deleting_after_the_re_read(
        ledger: Ledger, holds: Holds) -> None:
    """The retag's own condition (``if_tags`` pending), past the re-read: the fix read the
    ready document's row again (still committed, its retag owed) and is held before its
    retag (``reconcile.before_retag``). Meanwhile the retag worker pays the owed retag, the
    document is deleted and the deletion path, held after tagging the blob ``deleting``,
    has not deleted it yet. The fix wakes: its retag is refused (tags never go backwards:
    a ``committed`` written over ``deleting`` would make the deletion path's conditioned
    delete refuse), and the deletion path then deletes the blob and its row."""
    writer = deferred(ledger)
    doc = await writer.create("deleted-under-the-fix.txt", b"x", content_type="text/plain")
    assert await tag_of(ledger, doc.blob) == "pending"
    holds.at("reconcile.before_retag")
    fix = started(lambda: reconcile(ledger, fix=True, older_than=180, blocks=False))
    await holds.wait("reconcile.before_retag")
    assert (await Retagger(writer).run_once()).retagged == 1
    await writer.delete(doc.id)
    writer.clock_offset = writer.settings.delete_grace + 1
    holds.at("deletion.after_tag")
    deletion = started(lambda: Sweeper(writer).run_once())
    await holds.wait("deletion.after_tag")
    assert await tag_of(ledger, doc.blob) == "deleting"
    holds.go("reconcile.before_retag")
    report = await outcome(fix)
    assert not isinstance(report, BaseException), report
    assert (report.fixed, report.refused) == (0, 1), report.as_dict()
    assert await tag_of(ledger, doc.blob) == "deleting"
    holds.go("deletion.after_tag")
    swept = await outcome(deletion)
    assert not isinstance(swept, BaseException) and swept.deleted == 1, swept
    assert not [b async for b in ledger.store.list("")]


async def test_an_old_blob_awaiting_the_deletion_path_is_not_a_mismatch(
        ledger: Ledger) -> None:
    doc = await ledger.create("r.txt", b"one", content_type="text/plain")
    await ledger.replace(doc.id, b"two", expected_version=doc.version)
    other = await ledger.create("d.txt", b"gone", content_type="text/plain")
    await ledger.delete(other.id)
    report = await reconcile(ledger, fix=False, older_than=180, blocks=False)
    assert (report.mismatch, report.awaiting_deletion, report.exit_code) == (0, 2, 0), \
        report.as_dict()
