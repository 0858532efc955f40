"""held documents: processing before visibility

``documents.hold`` says that C4 makes the creation ``held`` (invisible to readers) instead of
``ready``; ``documents.owner`` names its writer (a digest of the token, see
``blobledger.api.auth.owner_of``; NULL for the library's own calls and for every document of
a previous release), the one caller told a held document's state. ``processing`` holds one
row per (document, version, processor): its state (pending, accepted, rejected), the claim
token and lease of the worker running it, the attempts made and the reason of a rejection.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

DOCUMENTS = table_name("documents")
PROCESSING = table_name("processing")

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(DOCUMENTS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("hold", sa.Boolean, nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("owner", sa.String(64)))
    op.create_table(
        PROCESSING,
        sa.Column("document_id", sa.String(32), primary_key=True),
        sa.Column("version", sa.Integer, primary_key=True),
        sa.Column("processor", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempt", sa.String(32)),
        sa.Column("lease_until", sa.DateTime(), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("owner", sa.String(64)),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )
    op.create_index(index_name("processing", "state_lease"), PROCESSING,
                    ["state", "lease_until"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_index(index_name("processing", "state_lease"), PROCESSING, schema=SCHEMA)
    op.drop_table(PROCESSING, schema=SCHEMA)
    with op.batch_alter_table(DOCUMENTS, schema=SCHEMA) as batch:
        batch.drop_column("owner")
        batch.drop_column("hold")
