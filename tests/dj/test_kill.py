"""A Django process killed (SIGKILL) at the Django failpoints on SQLite, where a save stages
inside its row's transaction: at ``django.after_attach`` (A4 done, not committed) nothing is
visible and the bytes, tagged ``pending`` under no row, go with ``reconcile --fix``; at
``django.after_commit`` (committed, A3 not done) the invoice is whole and ``reconcile --fix``
retags its blob ``committed``. (The example project is killed at every step of a save under
``runserver``: examples/django_invoices/test_example.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.dj.conftest import reconcile_fix, state, stored, sweep, tag
from tests.dj.invoices.models import Invoice

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3600.0
ON_DISK = pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)


def killed_at(point: str, number: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBLEDGER_", "DJANGO"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "tests.dj.child", str(connections["default"].settings_dict["NAME"]),
         json.dumps(settings.BLOBLEDGER), number, point],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr


def _stored_names() -> set[str]:
    from tests.dj.conftest import storage

    ledger = storage().ledger("default")

    async def names() -> set[str]:
        return {info.name async for info in ledger.ledger.store.list("")}

    return ledger.run(names())


@ON_DISK
def test_killed_after_the_attach(backend: str) -> None:
    killed_at("django.after_attach", "K-1")
    assert not Invoice.objects.exists()  # the transaction died with its process
    [name] = _stored_names()
    assert state(name) is None and tag(name) == "pending"
    sweep(3 * HOUR)  # no row: nothing for the sweeper
    assert reconcile_fix(3 * HOUR).fixed == 1
    assert not stored(name) and _stored_names() == set()


@ON_DISK
def test_killed_after_the_commit(backend: str) -> None:
    killed_at("django.after_commit", "K-2")
    invoice = Invoice.objects.get(number="K-2")
    name = str(invoice.pdf.name)
    assert state(name) == "attached" and tag(name) == "pending"  # A3 never ran
    assert reconcile_fix(3 * HOUR).fixed == 1
    assert tag(name) == "committed" and invoice.pdf.read() == b"killed on sqlite"
    sweep(3 * HOUR)
    sweep(6 * HOUR)
    assert state(name) == "attached" and stored(name)
