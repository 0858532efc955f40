"""attachments: blob rows owned by an application's row instead of a document

``blobs.document_id`` becomes nullable (an attachment belongs to no document); the owner of an
attachment is recorded by A4 as ``owner_table``, ``owner_key`` (the primary key as text) and
``owner_column``, with the uploaded ``filename``. The new state ``attached`` and kind
``attachment`` need no schema change (both columns are free text). Existing rows are untouched.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

BLOBS = table_name("blobs")

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.alter_column("document_id", existing_type=sa.String(32), nullable=True)
        batch.add_column(sa.Column("owner_table", sa.String(255)))
        batch.add_column(sa.Column("owner_key", sa.String(255)))
        batch.add_column(sa.Column("owner_column", sa.String(255)))
        batch.add_column(sa.Column("filename", sa.String(1024)))
    op.create_index(index_name("blobs", "owner"), BLOBS,
                    ["owner_table", "owner_key", "owner_column"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_index(index_name("blobs", "owner"), BLOBS, schema=SCHEMA)
    op.execute(f"DELETE FROM {SCHEMA + '.' if SCHEMA else ''}{BLOBS} WHERE document_id IS NULL")
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.drop_column("filename")
        batch.drop_column("owner_column")
        batch.drop_column("owner_key")
        batch.drop_column("owner_table")
        batch.alter_column("document_id", existing_type=sa.String(32), nullable=False)
