"""service keys: ``service_keys``, the secrets the service generates for itself

One row per key (``signing``: the key of the service's own read URLs and download links,
unless ``BLOBLEDGER_SIGNING_KEY`` sets one), written once by the first process that needs it
and read by every other, so that every instance of a deployment signs and checks alike.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, table_name

SERVICE_KEYS = table_name("service_keys")

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        SERVICE_KEYS,
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table(SERVICE_KEYS, schema=SCHEMA)
