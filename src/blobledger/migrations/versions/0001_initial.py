"""documents and blobs

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        table_name("documents"),
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(1024), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("blob_name", sa.String(1024), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("size", sa.BigInteger),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("sha256", sa.String(64)),
        sa.Column("md5", sa.String(32)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("name", name=f"uq_{table_name('documents')}_name"),
        schema=SCHEMA,
    )
    op.create_index(index_name("documents", "blob_name"), table_name("documents"),
                    ["blob_name"], schema=SCHEMA)
    op.create_index(index_name("documents", "status_name"), table_name("documents"),
                    ["status", "name"], schema=SCHEMA)
    op.create_table(
        table_name("blobs"),
        sa.Column("name", sa.String(1024), primary_key=True),
        sa.Column("document_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("size", sa.BigInteger),
        sa.Column("sha256", sa.String(64)),
        sa.Column("md5", sa.String(32)),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column("lease_until", sa.DateTime(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("idempotency_key", name=f"uq_{table_name('blobs')}_idempotency_key"),
        schema=SCHEMA,
    )
    op.create_index(index_name("blobs", "document_id"), table_name("blobs"), ["document_id"],
                    schema=SCHEMA)
    op.create_index(index_name("blobs", "state_changed"), table_name("blobs"),
                    ["state", "changed_at"], schema=SCHEMA)


def downgrade() -> None:
    op.drop_table(table_name("blobs"), schema=SCHEMA)
    op.drop_table(table_name("documents"), schema=SCHEMA)
