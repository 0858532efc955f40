"""Django integration: ``FileField`` uploads that survive rollbacks, crashes and pauses.

    INSTALLED_APPS = [..., "blobledger.django"]
    STORAGES = {"default": {"BACKEND": "blobledger.django.LedgerStorage"},
                "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    BLOBLEDGER = {"STORE_URL": "azure://invoices"}

See docs/django.md. The pieces: :mod:`.storage` (``LedgerStorage``), :mod:`.signals` (A4
and the detach in the row's transaction), :mod:`.sql` (the protocol's statements on Django's
connection), :mod:`.conf` (settings), :mod:`.views` and :mod:`.urls` (reading through the
ledger on local disk), ``management/commands`` (sweep, check, reconcile, doctor).
"""

from __future__ import annotations

from typing import Any

__all__ = ["LedgerStorage"]


def __getattr__(name: str) -> Any:
    if name == "LedgerStorage":  # imported lazily: INSTALLED_APPS imports this package early
        from blobledger.django.storage import LedgerStorage

        return LedgerStorage
    raise AttributeError(name)
