"""On PostgreSQL a file replaced or deleted inside a long transaction is ``deleting`` from the
commit, not from the transaction's start (PostgreSQL's ``now()``): its grace, which every read
URL signed before the commit must fit in, is never cut short by the transaction's length."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime

import pytest
from django.core.files.base import ContentFile
from django.db import connections

from blobledger.config import CLOCK_SKEW
from tests.dj.conftest import atomic, backend_alias, state, storage, stored, sweep
from tests.dj.invoices.models import Customer, Invoice

POSTGRESQL = pytest.mark.parametrize("backend", ["postgresql-azure"], indirect=True)


def _clock() -> datetime:
    """The database's clock now (not the transaction's start), naive UTC."""
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp() AT TIME ZONE 'UTC', now() AT TIME ZONE 'UTC'")
        now, started = cursor.fetchone()
    assert isinstance(now, datetime) and now > started  # the transaction has run a while
    return now


def _deleting_since(name: str) -> datetime:
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT changed_at FROM blobs WHERE name = %s AND state = 'deleting'",
                       [name])
        since = cursor.fetchone()[0]
    assert isinstance(since, datetime)
    return since


def _replace(invoice: Invoice) -> None:
    invoice.pdf = ContentFile(b"v2", name="v2.pdf")
    invoice.save()


def _delete(invoice: Invoice) -> None:
    invoice.delete()


def _delete_by_query(invoice: Invoice) -> None:
    Invoice.objects.filter(pk=invoice.pk).delete()


def _cascade(invoice: Invoice) -> None:
    assert invoice.customer is not None
    invoice.customer.delete()


@POSTGRESQL
@pytest.mark.parametrize("change", [_replace, _delete, _delete_by_query, _cascade])
def test_a_file_left_in_a_long_transaction_is_deleting_from_its_commit(
        backend: str, change: Callable[[Invoice], None]) -> None:
    customer = Customer.objects.create(name="c")
    invoice = Invoice.objects.create(number="INV-G", customer=customer,
                                     pdf=ContentFile(b"v1", name="v1.pdf"))
    old = str(invoice.pdf.name)
    with atomic():
        change(invoice)
        assert state(old) == "deleting"
        before_commit = _clock()
    assert _deleting_since(old) >= before_commit


SQLITE = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
#: how much longer than the clock-skew allowance (60 s) the transaction runs on
HELD = 90.0


def _since(name: str) -> datetime:
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT changed_at FROM blobs WHERE name = %s AND state = 'deleting'",
                       [name])
        value = cursor.fetchone()[0]
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


@SQLITE
@pytest.mark.parametrize("change", [_replace, _delete, _delete_by_query, _cascade])
def test_on_sqlite_a_file_left_in_a_long_transaction_is_deleting_from_its_commit(
        backend: str, change: Callable[[Invoice], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite has no deferred trigger: the detached names are stamped again as the
    transaction's last statement before COMMIT. The transaction here runs on for
    ``HELD`` s (the ledger's clock moved that far between the detach and the commit): the
    grace counts from the commit, and a sweeper whose clock is past the statement's grace,
    not the commit's, keeps the bytes."""
    customer = Customer.objects.create(name="c")
    invoice = Invoice.objects.create(number="INV-G", customer=customer,
                                     pdf=ContentFile(b"v1", name="v1.pdf"))
    old = str(invoice.pdf.name)
    found = storage()
    alias = backend_alias()
    with atomic():
        change(invoice)
        assert state(old) == "deleting"
        stamped = _since(old)
        later = found.settings_for(alias).with_(clock_offset=HELD)
        monkeypatch.setitem(found._settings, alias, later)  # the commit comes HELD s later
    assert (_since(old) - stamped).total_seconds() >= HELD
    grace = found.settings_for(alias).delete_grace
    assert sweep(ahead=grace + HELD / 2).deleted == 0  # past the statement's grace only
    assert stored(old) and state(old) == "deleting"
    assert sweep(ahead=grace + HELD + 1).deleted == 1  # past the commit's
    assert not stored(old)



#: how long the replace's transaction is held open (real seconds; ``BLOBLEDGER_GRACE_HOLD``
#: sets more, e.g. 65 for longer than the skew allowance itself)
HOLD = float(os.environ.get("BLOBLEDGER_GRACE_HOLD", "2"))


def _fetch(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bytes(response.read())
    except urllib.error.HTTPError:
        return None


@POSTGRESQL
def test_a_link_signed_inside_a_held_replace_reads_until_its_expiry(backend: str) -> None:
    """The pause: a replace's transaction held open (``now()`` fixed at its start) while a
    link to the old file is signed inside it. The sweeper and the deletion path run with
    their clock ``CLOCK_SKEW`` ahead (the most the rule allows) just before the link
    expires: the old bytes are still there and the link reads them. Without the trigger the
    file would be ``deleting`` since the transaction's start and gone ``HOLD`` s early."""
    invoice = Invoice.objects.create(number="INV-P", pdf=ContentFile(b"v1", name="v1.pdf"))
    old = str(invoice.pdf.name)
    lifetime = storage().url_lifetime(backend_alias())
    with atomic():
        _clock()  # the transaction's now() is fixed here
        time.sleep(HOLD)  # held open: a long request
        signed_at = _clock()
        link = invoice.pdf.url  # the old file is still the row's
        _replace(invoice)
    # just before the link expires, on a clock CLOCK_SKEW ahead of the database's
    ahead = (signed_at - _db_now()).total_seconds() + lifetime - 1 + CLOCK_SKEW
    assert sweep(ahead=ahead).deleted == 0
    assert stored(old) and _fetch(link) == b"v1"
    grace = storage().settings_for(backend_alias()).delete_grace
    assert sweep(ahead=grace + HOLD + CLOCK_SKEW).deleted == 1  # past the commit's grace
    assert not stored(old)


def _db_now() -> datetime:
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp() AT TIME ZONE 'UTC'")
        value = cursor.fetchone()[0]
    assert isinstance(value, datetime)
    return value
