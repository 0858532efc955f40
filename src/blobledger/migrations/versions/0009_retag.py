"""deferred retag: ``blobs.retag_due``, the retag a committed row still owes its blob

With ``BLOBLEDGER_RETAG=deferred``, C4 and R4 commit the blob row while its blob is still
tagged ``pending`` and stamp ``retag_due`` in the same statement; the retag worker tags the
blob ``committed`` and clears it. NULL (every row of a previous release): nothing owed.
The index serves the worker's claim and the lag (the oldest owed retag).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

BLOBS = table_name("blobs")

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("retag_due", sa.DateTime()))
    op.create_index(index_name("blobs", "retag_due"), BLOBS, ["retag_due"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_index(index_name("blobs", "retag_due"), BLOBS, schema=SCHEMA)
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.drop_column("retag_due")
