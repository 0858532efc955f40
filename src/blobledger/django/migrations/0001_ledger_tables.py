"""The ledger's own tables (``documents``, ``blobs``, ``idempotency_keys``, ``uploads``),
created by the ledger's Alembic migrations in the database being migrated, recorded in
their own version table (``blobledger_version``). Later releases of blobledger upgrade them
from this same operation: ``manage.py migrate blobledger`` runs it again only for a new
Django migration, so each release that adds a ledger migration adds one here too."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def upgrade_ledger(apps: Any, schema_editor: Any) -> None:
    from blobledger.django.migrate import upgrade_alias

    upgrade_alias(schema_editor.connection.alias)


class Migration(migrations.Migration):
    # the ledger migrates on a connection of its own, outside Django's transaction
    atomic = False
    initial = True
    operations = [migrations.RunPython(upgrade_ledger, migrations.RunPython.noop,
                                       elidable=False)]
