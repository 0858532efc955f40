"""S3 objects: a multipart object's parts, ETag and checksum; a part's checksum

``s3_objects`` gains what S3 keeps of an object written by a multipart upload: its ETag
(``etag``: the MD5 of its parts' MD5s and their number, ``<hex>-<n>``), its parts
(``parts``: JSON, each part's size and checksum, in order) and the upload's checksum
(``checksum_algorithm``, ``checksum_type``: ``COMPOSITE`` or ``FULL_OBJECT``, and the
object's ``checksum``, base64). ``meta`` stays required (``{}`` for a multipart object
without user metadata). ``s3_parts`` gains each part's ``checksum`` (base64, in its upload's
algorithm). Every new column is NULL on the rows written before: an object of one part (its
ETag the MD5 its document records), a part without a checksum.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, table_name

S3_PARTS = table_name("s3_parts")
S3_OBJECTS = table_name("s3_objects")

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(S3_OBJECTS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("etag", sa.String(48)))
        batch.add_column(sa.Column("parts", sa.Text))
        batch.add_column(sa.Column("checksum_algorithm", sa.String(16)))
        batch.add_column(sa.Column("checksum_type", sa.String(16)))
        batch.add_column(sa.Column("checksum", sa.String(128)))
    with op.batch_alter_table(S3_PARTS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("checksum", sa.String(128)))


def downgrade() -> None:
    with op.batch_alter_table(S3_PARTS, schema=SCHEMA) as batch:
        batch.drop_column("checksum")
    with op.batch_alter_table(S3_OBJECTS, schema=SCHEMA) as batch:
        for column in ("checksum", "checksum_type", "checksum_algorithm", "parts", "etag"):
            batch.drop_column(column)
