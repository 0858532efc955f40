"""buckets: namespaces of documents, each with its own settings

A ``buckets`` table (a bucket's name and its settings: the largest object, the media types
allowed, whether creations are held, its quota in bytes and in documents, its canned ACL:
who reads and writes it without a credential, and the S3 access key that owns it, if one
created it) holding one row,
``default``; ``documents`` gains its ``bucket`` (every existing document is in ``default``)
and a name becomes unique per bucket: the unique constraint on ``name`` gives way to one on
(``bucket``, ``name``), and the listing's index on (``status``, ``name``) to one on
(``bucket``, ``status``, ``name``). ``documents.bucket`` is a foreign key of
``buckets.name`` (no document in a bucket that does not exist, even one created by a writer
that looked the bucket up before its deletion).

Revision ID: 0012
Revises: 0011
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

BUCKETS = table_name("buckets")
DOCUMENTS = table_name("documents")
DEFAULT = "default"

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    buckets = op.create_table(
        BUCKETS,
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("max_object_bytes", sa.BigInteger),
        sa.Column("content_types", sa.Text),
        sa.Column("hold", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("quota_bytes", sa.BigInteger),
        sa.Column("quota_objects", sa.BigInteger),
        sa.Column("acl", sa.String(32), nullable=False, server_default="private"),
        sa.Column("owner", sa.String(128)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )
    op.bulk_insert(buckets, [{"name": DEFAULT, "hold": False, "acl": "private",
                              "created_at": datetime.now(UTC).replace(tzinfo=None)}])
    op.drop_index(index_name("documents", "status_name"), DOCUMENTS, schema=SCHEMA)
    with op.batch_alter_table(DOCUMENTS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("bucket", sa.String(63), nullable=False,
                                   server_default=DEFAULT))
        batch.drop_constraint(f"uq_{DOCUMENTS}_name", type_="unique")
        batch.create_unique_constraint(f"uq_{DOCUMENTS}_bucket_name", ["bucket", "name"])
        batch.create_foreign_key(f"fk_{DOCUMENTS}_bucket", BUCKETS, ["bucket"], ["name"],
                                 referent_schema=SCHEMA, ondelete="RESTRICT")
    op.create_index(index_name("documents", "bucket_status_name"), DOCUMENTS,
                    ["bucket", "status", "name"], schema=SCHEMA)


def downgrade() -> None:
    """Back to one namespace: only while every document is in ``default`` (a name taken in
    two buckets would break the unique constraint on ``name``)."""
    op.drop_index(index_name("documents", "bucket_status_name"), DOCUMENTS, schema=SCHEMA)
    with op.batch_alter_table(DOCUMENTS, schema=SCHEMA) as batch:
        batch.drop_constraint(f"fk_{DOCUMENTS}_bucket", type_="foreignkey")
        batch.drop_constraint(f"uq_{DOCUMENTS}_bucket_name", type_="unique")
        batch.create_unique_constraint(f"uq_{DOCUMENTS}_name", ["name"])
        batch.drop_column("bucket")
    op.create_index(index_name("documents", "status_name"), DOCUMENTS, ["status", "name"],
                    schema=SCHEMA)
    op.drop_table(BUCKETS, schema=SCHEMA)
