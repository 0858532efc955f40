"""uploads: resumable (tus) and direct uploads, intents that outlive one request

One row per upload: how it arrives (``mode``: ``tus`` or ``direct``), its blob row's name and
owner token, the declared length, the durable offset (bytes stored in parts), the parts' ids,
the store's handle (an S3 upload id; for a direct upload through ``serve``, the SHA-256 of
its URL's token), the metadata it was created with, when it expires, and the SHA-256 the
service computed from the stored bytes (set before C3; the sweeper rolls forward only what
was verified).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, table_name

UPLOADS = table_name("uploads")

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        UPLOADS,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("blob_name", sa.String(1024), nullable=False, unique=True),
        sa.Column("document_id", sa.String(32), nullable=False),
        sa.Column("attempt", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("length", sa.BigInteger, nullable=False),
        sa.Column("offset", sa.BigInteger, nullable=False),
        sa.Column("handle", sa.String(1024), nullable=False),
        sa.Column("parts", sa.Text, nullable=False),
        sa.Column("meta", sa.Text, nullable=False),
        sa.Column("sha256", sa.String(64)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        schema=SCHEMA,
    )


def downgrade() -> None:
    op.drop_table(UPLOADS, schema=SCHEMA)
