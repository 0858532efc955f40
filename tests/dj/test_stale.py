"""A stale instance (loaded before another save changed its file) never writes back the
file it loaded: the save is refused, and the row and the blob rows agree after it."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.files.base import ContentFile
from django.db import connections

from blobledger.errors import InvalidInput
from tests.dj.conftest import atomic, backend_alias, state
from tests.dj.invoices.models import Invoice


def _read(invoice: Invoice) -> bytes:
    with invoice.pdf.open("rb") as handle:
        return bytes(handle.read())


def test_a_stale_instance_never_writes_back_a_replaced_file(backend: str) -> None:
    created = Invoice.objects.create(number="INV-S1", pdf=ContentFile(b"v1", name="v1.pdf"))
    stale = Invoice.objects.get(pk=created.pk)
    fresh = Invoice.objects.get(pk=created.pk)
    fresh.pdf = ContentFile(b"v2", name="v2.pdf")
    fresh.save()
    old, new = str(stale.pdf.name), str(fresh.pdf.name)
    stale.number = "paid"
    with pytest.raises(InvalidInput, match=r"refresh_from_db") as refused:
        stale.save()
    assert isinstance(refused.value, ValueError) and new in str(refused.value)
    row = Invoice.objects.get(pk=created.pk)
    assert (row.number, row.pdf.name) == ("INV-S1", new)
    assert state(new) == "attached" and state(old) == "deleting"
    assert _read(row) == b"v2"
    stale.refresh_from_db()
    stale.number = "paid"
    stale.save()  # reloaded: saved, its file kept
    row = Invoice.objects.get(pk=created.pk)
    assert (row.number, row.pdf.name, state(new)) == ("paid", new, "attached")


def test_a_stale_instance_never_brings_back_a_cleared_file(backend: str) -> None:
    created = Invoice.objects.create(number="INV-S2", pdf=ContentFile(b"v1", name="v1.pdf"),
                                     scan=ContentFile(b"s1", name="s1.png"))
    stale = Invoice.objects.get(pk=created.pk)
    fresh = Invoice.objects.get(pk=created.pk)
    fresh.scan.delete()  # cleared and saved: its blob detached
    scan = str(stale.scan.name)
    assert state(scan) == "deleting"
    with pytest.raises(InvalidInput, match="scan"), atomic():
        stale.save()
    assert Invoice.objects.get(pk=created.pk).scan.name == ""
    assert state(scan) == "deleting" and state(created.pdf.name) == "attached"


def test_a_stale_empty_field_never_hides_a_new_file(backend: str) -> None:
    created = Invoice.objects.create(number="INV-S3", pdf=ContentFile(b"v1", name="v1.pdf"))
    stale = Invoice.objects.get(pk=created.pk)
    fresh = Invoice.objects.get(pk=created.pk)
    fresh.scan = ContentFile(b"s2", name="s2.png")
    fresh.save()
    with pytest.raises(InvalidInput, match="scan"):
        stale.save()
    assert Invoice.objects.get(pk=created.pk).scan.name == fresh.scan.name
    assert state(fresh.scan.name) == "attached"


def test_a_stale_instance_may_still_replace_or_clear_the_file(backend: str) -> None:
    """A stale instance given a new file (or cleared) writes what it was told: the blob rows
    follow the row (the newer file detached), as for any last write."""
    created = Invoice.objects.create(number="INV-S4", pdf=ContentFile(b"v1", name="v1.pdf"))
    stale = Invoice.objects.get(pk=created.pk)
    fresh = Invoice.objects.get(pk=created.pk)
    fresh.pdf = ContentFile(b"v2", name="v2.pdf")
    fresh.save()
    stale.pdf = ContentFile(b"v3", name="v3.pdf")
    stale.save()
    row = Invoice.objects.get(pk=created.pk)
    assert row.pdf.name == stale.pdf.name and _read(row) == b"v3"
    assert state(fresh.pdf.name) == "deleting" and state(stale.pdf.name) == "attached"


@pytest.mark.parametrize("backend", ["postgresql-azure"], indirect=True)
def test_a_stale_save_waiting_on_a_replace_is_refused_after_its_commit(backend: str) -> None:
    """The check runs after the row's UPDATE: a stale save that waits for the row's lock
    held by a replace still in flight sees the replace once it commits, and is refused."""
    created = Invoice.objects.create(number="INV-S5", pdf=ContentFile(b"v1", name="v1.pdf"))
    stale = Invoice.objects.get(pk=created.pk)
    fresh = Invoice.objects.get(pk=created.pk)
    outcome: list[BaseException | None] = []

    def save_stale() -> None:
        try:
            stale.number = "paid"
            stale.save()
            outcome.append(None)
        except BaseException as exc:  # reported to the test's thread
            outcome.append(exc)
        finally:
            connections[backend_alias()].close()

    with atomic():
        fresh.pdf = ContentFile(b"v2", name="v2.pdf")
        fresh.save()
        waiter = threading.Thread(target=save_stale)
        waiter.start()
        _wait_for_a_lock_wait()
    waiter.join()
    assert len(outcome) == 1 and isinstance(outcome[0], InvalidInput), outcome
    row = Invoice.objects.get(pk=created.pk)
    assert (row.number, row.pdf.name, state(fresh.pdf.name)) == (
        "INV-S5", fresh.pdf.name, "attached")


def _wait_for_a_lock_wait() -> None:
    """Until another session of this database waits for a lock (the stale save, blocked on
    the row the open transaction updated)."""
    with connections[backend_alias()].cursor() as cursor:
        for _ in range(3000):  # a minute at most
            cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
            if cursor.fetchone()[0]:
                return
            time.sleep(0.02)
    raise AssertionError("the stale save never waited for the row's lock")


def test_an_up_to_date_save_is_never_taken_for_stale_by_other_owners_files(
        backend: str) -> None:
    """The stale check reads its own owner column's blobs only (table, key and column):
    the same field of another row, another field of the same row, and a column of the same
    name in another table's row with the same key (an application's SQLAlchemy model on
    the same ledger) each hold an attached file, and a save of the instance as loaded, its
    file unchanged, goes through."""
    one = Invoice.objects.create(number="INV-O1", pdf=ContentFile(b"1", name="one.pdf"),
                                 scan=ContentFile(b"s", name="scan.pdf"))
    Invoice.objects.create(number="INV-O2", pdf=ContentFile(b"2", name="two.pdf"))
    elsewhere = Invoice.objects.create(number="INV-O3", pdf=ContentFile(b"3", name="x.pdf"))
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT owner_table, owner_key FROM blobs WHERE name = %s",
                       [str(one.pdf.name)])
        table, key = cursor.fetchone()
        cursor.execute("UPDATE blobs SET owner_table = %s, owner_key = %s WHERE name = %s",
                       [f"shop_{table}", key, str(elsewhere.pdf.name)])
    loaded = Invoice.objects.get(pk=one.pk)
    loaded.number = "paid"
    loaded.save()
    row = Invoice.objects.get(pk=one.pk)
    assert (row.number, row.pdf.name) == ("paid", one.pdf.name)
    assert state(str(one.pdf.name)) == "attached" and state(str(one.scan.name)) == "attached"
