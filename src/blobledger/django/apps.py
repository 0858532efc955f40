"""The Django app ``blobledger.django``: its migration creates the ledger's tables in each
database Django migrates; when ready, every model with a file field on a
:class:`~blobledger.django.LedgerStorage` gets A4 and the detach in its own transaction."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig, apps
from django.core import checks
from django.core.signals import setting_changed
from django.db import models
from django.db.backends.signals import connection_created
from django.db.models.signals import class_prepared


class BlobledgerConfig(AppConfig):
    name = "blobledger.django"
    label = "blobledger"
    verbose_name = "blobledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from blobledger.django.signals import hook
        from blobledger.django.staging import begin_immediate

        connection_created.connect(begin_immediate, weak=False,
                                   dispatch_uid="blobledger:sqlite")
        for model in apps.get_models(include_auto_created=True):
            hook(model)
        class_prepared.connect(_prepared, weak=False, dispatch_uid="blobledger:prepared")
        setting_changed.connect(_changed, weak=False, dispatch_uid="blobledger:settings")
        checks.register(check_storages)


def check_storages(**_: Any) -> list[checks.CheckMessage]:
    """``manage.py check``: every ``LedgerStorage`` of ``STORAGES`` has settings blobledger
    accepts, and URLs that cannot outlive their blobs (``url_expiry`` within the grace)."""
    from django.core.files.storage import storages
    from django.utils.module_loading import import_string

    from blobledger.django.storage import LedgerStorage
    from blobledger.errors import ConfigError

    found: list[checks.CheckMessage] = []
    backends: dict[str, Any] = dict(storages.backends)  # the stubs call them storages
    for alias, config in backends.items():
        backend = import_string(str(config.get("BACKEND", "")))
        if not (isinstance(backend, type) and issubclass(backend, LedgerStorage)):
            continue  # the others are not built: they may need settings of their own
        storage = storages[alias]
        assert isinstance(storage, LedgerStorage)
        try:
            storage.url_lifetime()
        except ConfigError as exc:
            found.append(checks.Error(f'STORAGES["{alias}"]: {exc}', id="blobledger.E001"))
    return found


def _prepared(sender: type[models.Model], **_: Any) -> None:
    from blobledger.django.signals import hook

    hook(sender)


def _changed(setting: str, **_: Any) -> None:
    """Django's settings changed (tests' ``override_settings``): storages and ledgers read
    them again on next use."""
    if setting in ("BLOBLEDGER", "STORAGES", "DATABASES") or setting.startswith("BLOBLEDGER_"):
        from blobledger.django.conf import close_ledgers
        from blobledger.django.storage import forget_all_settings

        forget_all_settings()
        close_ledgers()
