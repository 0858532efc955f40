"""blobs: an index on the name in code point order (PostgreSQL)

The reconciler reads ``blobs`` in keyset pages ordered ``name COLLATE "C"`` (the store's
listing order); this index serves those pages. SQLite's binary collation already matches.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

_TABLE = f"{SCHEMA}.{table_name('blobs')}" if SCHEMA else table_name("blobs")
_INDEX = f"{SCHEMA}.{index_name('blobs', 'name_c')}" if SCHEMA else index_name("blobs", "name_c")

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f'CREATE INDEX {index_name("blobs", "name_c")} ON {_TABLE} '
                   '(name COLLATE "C")')


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP INDEX {_INDEX}")
