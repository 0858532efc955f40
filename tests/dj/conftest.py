"""Django, configured here and only here: pytest-django's fixtures then work for the tests of
this folder, and the rest of the suite never sees a Django setting.

``backend`` picks the database and the store of a test: SQLite + disk, PostgreSQL + Azurite,
PostgreSQL + moto's S3; each test gets a fresh store and empty ledger tables. ``sweep``
runs the sweeper and the deletion path as a process hours ahead would."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import django
import pytest
from django.conf import settings

from tests.dj import settings as test_settings

if not settings.configured:
    settings.configure(**test_settings.SETTINGS)
    django.setup()

from django.core.files.storage import storages
from django.db import connections, transaction
from django.test.utils import override_settings

from blobledger.django.conf import close_ledgers, run
from blobledger.django.storage import LedgerStorage
from blobledger.errors import BlobNotFound
from blobledger.protocol.ledger import Ledger
from blobledger.workers.reconciler import ReconcileReport, reconcile
from blobledger.workers.sweeper import Sweeper, SweepReport
from tests.dj.routing import ALIAS

#: every test runs on these two; ``EVERY_BACKEND`` adds PostgreSQL + S3 (moto is slow)
BACKENDS = ["sqlite-local", "postgresql-azure"]
EVERY_BACKEND = pytest.mark.parametrize(
    "backend", [*BACKENDS, "postgresql-s3"], indirect=True)


def _store_settings(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """A fresh store for one test (its rows start empty too: ``_empty_ledger``)."""
    if kind == "local":
        return {"STORE_URL": f"file://{test_settings.STORE / uuid.uuid4().hex[:12]}"}
    if kind == "azure":
        azurite = request.getfixturevalue("azurite")
        return {"STORE_URL": f"azure://d{uuid.uuid4().hex[:20]}",
                "AZURE": {"connection_string": azurite.connection_string}}
    moto = request.getfixturevalue("moto")
    return {"STORE_URL": f"s3://b{uuid.uuid4().hex[:20]}",
            "S3": {"endpoint_url": moto.endpoint_url, "addressing": "path",
                   "region": "us-east-1"}}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    db_kind, store_kind = str(request.param).split("-")
    if store_kind == "s3":
        for key, value in request.getfixturevalue("moto").environment().items():
            monkeypatch.setenv(key, value)
    block = {**settings.BLOBLEDGER, **_store_settings(store_kind, request)}
    ALIAS["current"] = "default" if db_kind == "sqlite" else "pg"
    _empty_ledger(ALIAS["current"])
    try:
        with override_settings(BLOBLEDGER=block):
            yield str(request.param)
    finally:
        ALIAS["current"] = "default"
        close_ledgers()


def storage() -> LedgerStorage:
    found = storages["default"]
    assert isinstance(found, LedgerStorage)
    return found


def _empty_ledger(alias: str) -> None:
    """Each test starts with empty ledger tables, as its store is a fresh one (Django's
    flush leaves these tables alone)."""
    with connections[alias].cursor() as cursor:
        for table in ("idempotency_keys", "uploads", "documents", "blobs", "events",
                      "event_deliveries"):
            cursor.execute(f"DELETE FROM {table}")


def backend_alias() -> str:
    return ALIAS["current"]


def atomic() -> transaction.Atomic:
    """``transaction.atomic()`` on the current backend's database."""
    return transaction.atomic(using=ALIAS["current"])


def state(name: str | None) -> str | None:
    """The ledger row's state of a blob (None: no row), on the current database."""
    assert name
    with connections[ALIAS["current"]].cursor() as cursor:
        cursor.execute("SELECT state FROM blobs WHERE name = %s", [name])
        row = cursor.fetchone()
    return None if row is None else str(row[0])


def stored(name: str | None) -> bool:
    """Whether the store holds a blob of that name."""
    assert name
    ledger = storage().ledger(ALIAS["current"])
    try:
        ledger.run(ledger.ledger.store.stat(name))
    except BlobNotFound:
        return False
    return True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here commits for real (the ledger has connections of its own) on the
    database of its backend, emptied after it."""
    for item in items:
        if "tests/dj/" not in str(item.path).replace("\\", "/"):
            continue
        callspec = getattr(item, "callspec", None)
        kind = str(callspec.params.get("backend", "sqlite")) if callspec else "sqlite"
        databases = ["default"] if kind.startswith("sqlite") else ["pg"]
        item.add_marker(pytest.mark.django_db(transaction=True, databases=databases))


def sweep(ahead: float) -> SweepReport:
    """One sweep (stale intents, then the deletion path) by a process ``ahead`` seconds in
    the future, on the current backend."""
    current = storage().settings_for(ALIAS["current"])

    async def main() -> SweepReport:
        async with Ledger.from_settings(current.with_(clock_offset=ahead),
                                        migrate=False) as ledger:
            return await Sweeper(ledger).run_once()

    report = run(main())
    assert not report.errors, report
    return report


def tag(name: str | None) -> str | None:
    """The ``state`` tag of a stored blob (None: untagged)."""
    assert name
    ledger = storage().ledger(ALIAS["current"])
    return ledger.run(ledger.ledger.store.get_tags(name)).get("state")


def reconcile_fix(ahead: float) -> ReconcileReport:
    """``reconcile --fix`` (orphans older than ``sweep_after``) by a process ``ahead``
    seconds in the future, on the current backend."""
    current = storage().settings_for(ALIAS["current"])

    async def main() -> ReconcileReport:
        async with Ledger.from_settings(current.with_(clock_offset=ahead),
                                        migrate=False) as ledger:
            return await reconcile(ledger, fix=True, older_than=current.sweep_after)

    report = run(main())
    assert not report.errors, report
    return report


def on_sqlite(backend: str) -> bool:
    return backend.startswith("sqlite")
