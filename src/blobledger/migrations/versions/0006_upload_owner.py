"""upload owner: which token created an upload, for the per-token limits

``uploads.owner`` holds a short digest of the bearer token that created the upload (never the
token itself; see ``blobledger.api.auth.owner_of``), or NULL for an upload created without
one (the library's own calls, and every upload of a previous release: they count against no
token). Open uploads are counted by owner, hence the index.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

UPLOADS = table_name("uploads")

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table(UPLOADS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("owner", sa.String(64)))
    op.create_index(index_name("uploads", "owner_state"), UPLOADS, ["owner", "state"],
                    schema=SCHEMA)


def downgrade() -> None:
    op.drop_index(index_name("uploads", "owner_state"), UPLOADS, schema=SCHEMA)
    with op.batch_alter_table(UPLOADS, schema=SCHEMA) as batch:
        batch.drop_column("owner")
