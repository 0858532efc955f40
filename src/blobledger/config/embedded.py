"""The ledger inside an application's database (Django's, ``Ledger.from_engine``): its
migrations' version table and its tables' layout (``BLOBLEDGER_VERSION_TABLE``,
``BLOBLEDGER_TABLE_PREFIX``, ``BLOBLEDGER_DB_SCHEMA``). Django supplies every other setting
through :mod:`blobledger.django.conf` (``settings.BLOBLEDGER``, a storage's ``OPTIONS``)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict

from blobledger.config.fields import setting


class EmbeddedSettings(BaseModel):
    """The ledger's tables among an application's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Alembic's version table for the ledger's migrations; None: ``alembic_version`` on the
    #: ledger's own engine, ``blobledger_version`` on an application's (``Ledger.from_engine``)
    version_table: str | None = setting(
        None, "the Alembic version table of the ledger's migrations",
        "`alembic_version`; `blobledger_version` on an application's engine")
    #: the layout of the ledger's tables (``BLOBLEDGER_TABLE_PREFIX``, ``BLOBLEDGER_DB_SCHEMA``);
    #: fixed when blobledger is imported (``blobledger.models``), so these only state what a
    #: ledger expects: None accepts the imported layout, anything else must equal it
    table_prefix: str | None = setting(
        None, "prefix of the ledger's table and index names in a shared database (read at "
        "import)", "none")
    db_schema: str | None = setting(
        None, "PostgreSQL schema of the ledger's tables (created if missing; read at import)",
        "the connection's default")


def table_layout(name: str) -> str:
    """The raw value of a table-layout variable (``BLOBLEDGER_TABLE_PREFIX``,
    ``BLOBLEDGER_DB_SCHEMA``), for :mod:`blobledger.models`, which reads it once at import,
    before any settings object exists: every prebuilt statement names the tables. A
    settings object then states what a ledger expects (``table_prefix``, ``db_schema``)."""
    return os.environ.get(name, "").strip()
