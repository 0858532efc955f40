"""The management commands run the command line's own subcommands with Django's settings;
the app's migration created the ledger's tables in each database."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import override_settings

from tests.dj.conftest import atomic, backend_alias, on_sqlite, state, storage, stored
from tests.dj.invoices.models import Invoice


class Boom(Exception):
    pass


def test_the_migration_made_the_ledgers_tables(backend: str) -> None:
    with connections[backend_alias()].cursor() as cursor:
        cursor.execute("SELECT version_num FROM blobledger_version")
        assert cursor.fetchone() is not None
        cursor.execute("SELECT count(*) FROM blobs")
        assert cursor.fetchone() is not None


def test_sweep_and_check(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Boom), atomic():
        lost = Invoice.objects.create(number="M-1", pdf=ContentFile(b"m", name="m.pdf")).pdf.name
        raise Boom
    call_command("blobledger_check", "--json", database=backend_alias())
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    call_command("blobledger_sweep", "--once", database=backend_alias())
    block = {**settings.BLOBLEDGER, "CLOCK_OFFSET": 3600}
    if on_sqlite(backend):  # staged inside the transaction: no row, an orphan tagged pending
        assert state(lost) is None and stored(lost)
        with override_settings(BLOBLEDGER=block), \
                pytest.raises(CommandError, match="status 1"):  # a finding (fixed)
            call_command("blobledger_reconcile", "--fix", "--json", database=backend_alias())
        assert '"fixed": true' in capsys.readouterr().out and not stored(lost)
        return
    assert state(lost) == "pending"  # not before its age
    with override_settings(BLOBLEDGER=block):
        call_command("blobledger_sweep", "--once", database=backend_alias())
    with override_settings(BLOBLEDGER={**block, "CLOCK_OFFSET": 7200}):
        call_command("blobledger_sweep", "--once", database=backend_alias())
    assert state(lost) is None and not stored(lost)
    out = capsys.readouterr().out
    assert '"swept"' in out or "swept" in out


def test_reconcile_and_doctor(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    Invoice.objects.create(number="R-1", pdf=ContentFile(b"r", name="r.pdf"))
    call_command("blobledger_reconcile", "--json", database=backend_alias())
    reconciled = capsys.readouterr().out
    call_command("blobledger_doctor", "--json", database=backend_alias())
    doctor = json.loads(capsys.readouterr().out)
    report = json.loads(reconciled)
    assert report["rows"] >= 1 and report["findings_total"] == 0 and report["exit_code"] == 0
    assert doctor["ok"] is True
    assert doctor["store"].startswith(storage().settings_for(backend_alias()).store_url)


@pytest.mark.parametrize("backend", ["sqlite-local"], indirect=True)
def test_a_failing_subcommand_is_a_command_error(backend: str) -> None:
    with pytest.raises(CommandError) as raised:
        call_command("blobledger_sweep", "--once", "--interval", "5m")
    assert "exclude each other" in str(raised.value)


@pytest.mark.parametrize(("command", "options"), [
    ("blobledger_sweep", ["--once", "--interval", "--batch"]),
    ("blobledger_check", ["--settled", "--json"]),
    ("blobledger_reconcile", ["--fix", "--older-than"]),
])
def test_help_shows_the_subcommands_own_options(command: str, options: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``manage.py <command> --help``: Django's options, then the subcommand's own (the
    docs use them), each once."""
    with pytest.raises(SystemExit) as done:
        call_command(command, "--help")
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "options of blobledger" in shown and "--database" in shown
    for option in options:
        assert shown.count(f"  {option}") == 1, (option, shown)


def test_a_write_without_a_signal_is_reported_by_check(
        backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``QuerySet.update`` sends no signal: the blob stays attached to a row that no longer
    names it, and ``blobledger_check`` says so (docs/django.md, "What it does not do")."""
    invoice = Invoice.objects.create(number="U-1", pdf=ContentFile(b"u", name="u.pdf"))
    name = str(invoice.pdf.name)
    Invoice.objects.filter(pk=invoice.pk).update(pdf="")
    assert state(name) == "attached"  # nothing detached it
    with pytest.raises(CommandError, match="status 1"):
        call_command("blobledger_check", "--json", database=backend_alias())
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"] and any(name in v["subject"] for v in report["violations"])
