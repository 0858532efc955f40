"""documents and blobs

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "documents",
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
        sa.UniqueConstraint("name", name="uq_documents_name"),
    )
    op.create_index("ix_documents_blob_name", "documents", ["blob_name"])
    op.create_index("ix_documents_status_name", "documents", ["status", "name"])
    op.create_table(
        "blobs",
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
        sa.UniqueConstraint("idempotency_key", name="uq_blobs_idempotency_key"),
    )
    op.create_index("ix_blobs_document_id", "blobs", ["document_id"])
    op.create_index("ix_blobs_state_changed", "blobs", ["state", "changed_at"])


def downgrade() -> None:
    op.drop_table("blobs")
    op.drop_table("documents")
