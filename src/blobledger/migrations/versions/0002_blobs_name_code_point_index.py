"""blobs: an index on the name in code point order (PostgreSQL)

The reconciler reads ``blobs`` in keyset pages ordered ``name COLLATE "C"`` (the store's
listing order); this index serves those pages. SQLite's binary collation already matches.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute('CREATE INDEX ix_blobs_name_c ON blobs (name COLLATE "C")')


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_blobs_name_c")
