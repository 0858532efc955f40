"""The ledger's migration 0012 (buckets: documents gain their bucket, a name is unique per
bucket), applied to a database migrated by a previous release (``0001`` runs each ledger
migration only once)."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def upgrade_ledger(apps: Any, schema_editor: Any) -> None:
    from blobledger.django.migrate import upgrade_alias

    upgrade_alias(schema_editor.connection.alias)


class Migration(migrations.Migration):
    atomic = False  # the ledger migrates on a connection of its own
    dependencies = [("blobledger", "0002_grace_from_commit")]
    operations = [migrations.RunPython(upgrade_ledger, migrations.RunPython.noop,
                                       elidable=False)]
