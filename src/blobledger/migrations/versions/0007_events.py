"""events: the outbox of what happened, and its delivery log

``events`` holds one row per change (``document.ready``, ``document.replaced``,
``document.deleted``, ``attachment.attached``, ``attachment.detached``), written in the
change's own transaction: an increasing ``id`` (the order), a unique ``event_id`` (the
``webhook-id``), what it is about (``subject``: the document's id, or the attachment's blob
name; the document, blob and owner; version, name, size, checksums, content type), the
payload delivered (JSON), and its delivery state (``pending``, ``delivered``, ``dead``;
``attempts``, ``next_attempt_at``, a worker's claim ``attempt``/``lease_until``).
``event_deliveries`` logs each attempt to each target. A database of an older release has
no event for its past changes: events start with the upgrade.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

EVENTS = table_name("events")
DELIVERIES = table_name("event_deliveries")

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _serial() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        EVENTS,
        sa.Column("id", _serial(), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(40), nullable=False, unique=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(1024), nullable=False),
        sa.Column("document_id", sa.String(32)),
        sa.Column("blob_name", sa.String(1024)),
        sa.Column("owner_table", sa.String(255)),
        sa.Column("owner_key", sa.String(255)),
        sa.Column("owner_column", sa.String(255)),
        sa.Column("version", sa.Integer),
        sa.Column("name", sa.String(1024)),
        sa.Column("size", sa.BigInteger),
        sa.Column("sha256", sa.String(64)),
        sa.Column("md5", sa.String(32)),
        sa.Column("content_type", sa.String(255)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=False),
        sa.Column("attempt", sa.String(32)),
        sa.Column("lease_until", sa.DateTime(), nullable=False),
        sa.Column("delivered_at", sa.DateTime()),
        sa.Column("last_error", sa.Text),
        schema=SCHEMA,
    )
    op.create_index(index_name("events", "state_next"), EVENTS, ["state", "next_attempt_at"],
                    schema=SCHEMA)
    op.create_index(index_name("events", "subject_id"), EVENTS, ["subject", "id"],
                    schema=SCHEMA)
    op.create_table(
        DELIVERIES,
        sa.Column("id", _serial(), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("attempt_no", sa.Integer, nullable=False),
        sa.Column("target", sa.String(1024), nullable=False),
        sa.Column("claim", sa.String(32)),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime()),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("error", sa.Text),
        schema=SCHEMA,
    )
    op.create_index(index_name("event_deliveries", "event_id"), DELIVERIES, ["event_id"],
                    schema=SCHEMA)


def downgrade() -> None:
    op.drop_table(DELIVERIES, schema=SCHEMA)
    op.drop_table(EVENTS, schema=SCHEMA)
