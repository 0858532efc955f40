"""A save paused while the sweeper runs ahead: between the staging and the row's
transaction (the sweeper fences the staged blob: the save fails, nothing is visible), and
on PostgreSQL between A4 and the commit (the sweeper's claim skips the locked row: the
commit attaches). On SQLite, where a save stages inside its transaction, paused at the two
Django failpoints: after A4 (the write lock held: the reconciler's delete of the blob it
sees without a row waits for the commit, then finds the row) and after the commit, before
A3 (``reconcile --fix`` retags the attached row's blob; the writer's A3 then agrees)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from django.core.files.base import ContentFile

from blobledger import failpoints
from blobledger.errors import AttachLost
from blobledger.workers import reconciler
from tests.dj.conftest import atomic, reconcile_fix, state, stored, sweep, tag
from tests.dj.invoices.models import Invoice

HOUR = 3600.0


def test_paused_between_the_staging_and_the_save(backend: str) -> None:
    invoice = Invoice(number="P-1")
    invoice.pdf.save("p.pdf", ContentFile(b"paused"), save=False)  # staged (A1-A3)
    name = invoice.pdf.name
    sweep(HOUR)  # the sweeper of a process an hour ahead fences it
    with pytest.raises(AttachLost):
        invoice.save()
    assert not Invoice.objects.exists()
    sweep(2 * HOUR)
    assert state(name) is None and not stored(name)


@pytest.mark.parametrize("backend", ["postgresql-azure"], indirect=True)
def test_paused_between_the_attach_and_the_commit(backend: str) -> None:
    attached, resume = threading.Event(), threading.Event()
    names: list[str] = []

    def save() -> None:
        from django.db import connections

        try:
            with atomic():
                invoice = Invoice.objects.create(number="P-2",
                                                 pdf=ContentFile(b"held", name="h.pdf"))
                names.append(str(invoice.pdf.name))
                attached.set()
                resume.wait(60)
        finally:
            connections.close_all()

    saver = threading.Thread(target=save)
    saver.start()
    assert attached.wait(60)
    report = sweep(3 * HOUR)  # claims stale pending rows: this one is locked, skipped
    resume.set()
    saver.join(60)
    assert report.errors == 0
    assert state(names[0]) == "attached" and stored(names[0])
    assert Invoice.objects.get(number="P-2").pdf.read() == b"held"


class _Held:
    """A save in a thread of its own, held at one failpoint until released."""

    def __init__(self, point: str) -> None:
        self.point, self.reached, self.release = point, threading.Event(), threading.Event()
        self.names: list[str] = []
        self.failure: list[BaseException] = []
        self.thread = threading.Thread(target=self._save)

    async def hook(self, point: str) -> None:
        if point == self.point and not self.reached.is_set():
            self.reached.set()
            await asyncio.to_thread(self.release.wait, 60)

    def _save(self) -> None:
        from django.db import connections

        try:
            invoice = Invoice(number="S-1")
            invoice.pdf = ContentFile(b"held on sqlite", name="s.pdf")
            invoice.save()  # in atomic(): SQLite stages inside the transaction
            self.names.append(str(invoice.pdf.name))
        except BaseException as exc:
            self.failure.append(exc)
        finally:
            connections.close_all()


@pytest.fixture
def held(request: pytest.FixtureRequest) -> Iterator[_Held]:
    found = _Held(request.param)
    failpoints.set_hook(found.hook)
    try:
        yield found
    finally:
        found.release.set()
        failpoints.set_hook(None)
        found.thread.join(60)


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
@pytest.mark.parametrize("held", ["django.after_attach"], indirect=True)
def test_sqlite_paused_after_the_attach(backend: str, held: _Held,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fence = reconciler._Merge.writers_done
    at_fence = threading.Event()

    def watched(self: reconciler._Merge) -> object:
        at_fence.set()
        return fence(self)

    monkeypatch.setattr(reconciler._Merge, "writers_done", watched)
    held.thread.start()
    assert held.reached.wait(60)
    # the blob is stored, tagged pending, and its row not visible outside the transaction:
    # an orphan to the reconciler's listing. Its delete waits for SQLite's write lock,
    # which the paused transaction holds; released, the commit lands and the row is seen.
    def release_at_the_fence() -> None:
        at_fence.wait(60)
        held.release.set()

    threading.Thread(target=release_at_the_fence).start()
    report = reconcile_fix(3 * HOUR)
    held.thread.join(60)
    assert not held.failure, held.failure
    assert at_fence.is_set() and report.fixed == 0 and report.kept == 1
    name = held.names[0]
    assert state(name) == "attached" and tag(name) == "committed"
    sweep(3 * HOUR)
    sweep(6 * HOUR)
    assert stored(name) and Invoice.objects.get(number="S-1").pdf.read() == b"held on sqlite"


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
@pytest.mark.parametrize("held", ["django.after_commit"], indirect=True)
def test_sqlite_paused_after_the_commit(backend: str, held: _Held) -> None:
    held.thread.start()
    assert held.reached.wait(60)
    invoice = Invoice.objects.get(number="S-1")  # committed, A3 not yet done
    name = str(invoice.pdf.name)
    assert state(name) == "attached" and tag(name) == "pending"
    sweep(3 * HOUR)  # nothing stale: the row is attached
    report = reconcile_fix(6 * HOUR)  # the attached row's pending blob: retagged
    assert report.fixed == 1 and tag(name) == "committed"
    held.release.set()
    held.thread.join(60)
    assert not held.failure, held.failure  # its own A3 finds the blob committed already
    assert held.names == [name] and state(name) == "attached" and tag(name) == "committed"
    assert invoice.pdf.read() == b"held on sqlite"
