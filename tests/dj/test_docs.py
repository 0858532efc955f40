"""docs/django.md's code blocks, run: the settings block configures what this project's
settings say, and the usage block runs against the test project's ``Invoice``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db import transaction
from django.urls import include, path
from django.utils.module_loading import import_string

from blobledger.django import LedgerStorage
from blobledger.django.conf import ledger_settings
from tests.dj.conftest import state
from tests.dj.invoices.models import Invoice

DOC = Path(__file__).resolve().parents[2] / "docs" / "django.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_setup_block() -> None:
    setup = blocks()[0]
    assert len(setup.strip().splitlines()) == 5
    namespace: dict[str, Any] = {"urlpatterns": [], "path": path, "include": include}
    exec(setup, namespace)
    assert "blobledger.django" in namespace["INSTALLED_APPS"]
    assert import_string(namespace["STORAGES"]["default"]["BACKEND"]) is LedgerStorage
    assert namespace["urlpatterns"][0].urlconf_name.__name__ == "blobledger.django.urls"
    settings = ledger_settings("default", {k.lower(): v
                                           for k, v in namespace["BLOBLEDGER"].items()})
    assert settings.store_url == "azure://invoices"


@pytest.mark.parametrize("backend", ["sqlite-local", "postgresql-azure"], indirect=True)
def test_the_usage_block(backend: str) -> None:
    namespace: dict[str, Any] = {"Invoice": Invoice, "ContentFile": ContentFile,
                                 "transaction": _OnBackend()}
    exec(blocks()[1], namespace)
    assert namespace["link"]
    replacement = namespace["invoice"].pdf.name
    assert state(replacement) == "deleting" and not Invoice.objects.exists()


class _OnBackend:
    """``transaction`` whose ``atomic()`` is on the backend's database."""

    @staticmethod
    def atomic() -> transaction.Atomic:
        from tests.dj.conftest import atomic

        return atomic()


def test_settings_come_from_django(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options over ``BLOBLEDGER`` over ``BLOBLEDGER_*`` settings over the environment;
    the database is Django's."""
    from django.test import override_settings

    monkeypatch.setenv("BLOBLEDGER_DELETE_GRACE", "7")
    monkeypatch.setenv("BLOBLEDGER_UPLOAD_DEADLINE", "8")
    with override_settings(BLOBLEDGER_UPLOAD_DEADLINE="9", BLOBLEDGER_BLOB_PREFIX="x",
                           BLOBLEDGER={"blob_prefix": "y", "SWEEP_AFTER": "2m"}):
        settings = ledger_settings("default", {"sweep_after": 300})
    assert (settings.delete_grace, settings.upload_deadline) == (7, 9)
    assert (settings.blob_prefix, settings.sweep_after) == ("y", 300)
    from django.db import connections

    assert settings.database_url.startswith("sqlite:///")
    assert settings.database_url.endswith(str(connections["default"].settings_dict["NAME"]))
    assert settings.version_table == "blobledger_version"
