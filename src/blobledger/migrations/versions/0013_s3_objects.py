"""S3 objects: a multipart upload's parts and an object's S3 attributes

``s3_parts``: one row per part of an S3 multipart upload (``upload_id`` is the upload's row
in ``uploads``, mode ``s3``): its number as the client gave it, the store's id of the staged
part, its size and MD5 (the part's ETag). A part uploaded again replaces its row.

``s3_objects``: one row per blob written through the S3 endpoint with user metadata
(``x-amz-meta-*``, JSON) or a canned ACL of its own (``x-amz-acl``; none: the bucket's
applies): keyed by the blob's name, so each version of a document has its own, written
after the intent's row (C1/R1) and before the document becomes visible.

A row whose upload or blob is gone is removed by the endpoint itself (see
``blobledger.s3api.rows.forget_orphans``).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, table_name

S3_PARTS = table_name("s3_parts")
S3_OBJECTS = table_name("s3_objects")

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        S3_PARTS,
        sa.Column("upload_id", sa.String(32), primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        sa.Column("part", sa.String(1024), nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("md5", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )
    op.create_table(
        S3_OBJECTS,
        sa.Column("blob_name", sa.String(1024), primary_key=True),
        sa.Column("meta", sa.Text, nullable=False),
        sa.Column("acl", sa.String(32)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table(S3_OBJECTS, schema=SCHEMA)
    op.drop_table(S3_PARTS, schema=SCHEMA)
