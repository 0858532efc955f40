"""fencing: an owner token on every blob row; idempotency keys in a table of their own

``blobs.attempt`` holds the token of whoever owns a row (an upload attempt or a sweeper's
claim); every transition compares it. Idempotency keys move from ``blobs.idempotency_key``
to ``idempotency_keys``, which keeps the first response for the retention period: pending
intents keep their key (state ``pending``); finished creations get their response back (a
creation always answers version 1: the document's id, name and creation time, the first
blob's name, size, content type and SHA-256), also when the document was replaced since
(its first blob row, ``deleting``, still holds the key); with 24 hours to live from the
upgrade. The previous release kept no response, and not the time of C4: ``updated_at`` is
the creation time. A creation whose document was deleted since keeps its key without a
response (the previous release removed the document row, and its name with it): a retry is
refused as that release refused it (IdempotencyConflict), and never creates a second
document.

Revision ID: 0003
Revises: 0002
"""

import json
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

from blobledger.protocol.models import SCHEMA, index_name, table_name

BLOBS, KEYS = table_name("blobs"), table_name("idempotency_keys")


def _qualified(name: str) -> str:
    return f"{SCHEMA}.{name}" if SCHEMA else name

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _iso(value: datetime) -> str:
    return value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _datetime(value: object, default: datetime) -> datetime:
    """A timestamp as the driver returns it from a text query: a datetime (PostgreSQL) or
    the ISO text SQLite stores (naive UTC either way)."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=None)
    return default


def upgrade() -> None:
    op.add_column(BLOBS, sa.Column("attempt", sa.String(32)), schema=SCHEMA)
    keys = op.create_table(
        KEYS,
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("blob_name", sa.String(1024), nullable=False),
        sa.Column("document_id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(1024)),
        sa.Column("content_type", sa.String(255), nullable=False),
        sa.Column("sha256", sa.String(64)),
        sa.Column("response", sa.Text),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime()),
        schema=SCHEMA,
    )
    op.create_index(index_name("idempotency_keys", "blob_name"), KEYS, ["blob_name"],
                    schema=SCHEMA)
    op.create_index(index_name("idempotency_keys", "state_expires"), KEYS,
                    ["state", "expires_at"], schema=SCHEMA)
    bind = op.get_bind()
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = bind.execute(sa.text(
        "SELECT b.idempotency_key, b.name, b.document_id, b.state, b.content_type, b.sha256, "
        "b.size, b.kind, d.name, d.status, d.blob_name, d.created_at "
        f"FROM {_qualified(BLOBS)} b LEFT JOIN {_qualified(table_name('documents'))} d "
        "ON d.id = b.document_id "
        "WHERE b.idempotency_key IS NOT NULL")).all()
    moved = []
    for (key, blob, doc_id, state, ctype, sha, size, kind, doc_name, status, doc_blob,
         created) in rows:
        if state == "pending":
            named = doc_name if doc_name and not doc_name.startswith("\x01") else None
            moved.append(dict(key=key, state="pending", blob_name=blob, document_id=doc_id,
                              name=named, content_type=ctype, sha256=None, response=None,
                              created_at=now, expires_at=None))
            continue
        # C4 wrote the size and SHA-256 on the blob row: a creation that finished, whether
        # its document is still on this blob (committed) or was replaced or deleted since
        # (deleting); an abandoned creation's row has neither and keeps no key.
        if kind != "create" or not sha or size is None:
            continue
        done = dict(key=key, state="done", blob_name=blob, document_id=doc_id,
                    content_type=ctype, sha256=sha, created_at=now,
                    expires_at=now + timedelta(hours=24))
        if status == "ready" and doc_name is not None and (
                (state == "committed" and doc_blob == blob)
                or (state == "deleting" and doc_blob != blob)):
            when = _datetime(created, now)
            response = dict(id=doc_id, name=doc_name, status="ready", version=1, size=size,
                            content_type=ctype, sha256=sha, blob=blob,
                            created_at=_iso(when), updated_at=_iso(when))
            moved.append(dict(done, name=doc_name, response=json.dumps(response)))
        elif status is None and state == "deleting":
            moved.append(dict(done, name=None, response=None))  # deleted: refused
    if moved:
        op.bulk_insert(keys, moved)
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.drop_constraint(f"uq_{BLOBS}_idempotency_key", type_="unique")
        batch.drop_column("idempotency_key")


def downgrade() -> None:
    with op.batch_alter_table(BLOBS, schema=SCHEMA) as batch:
        batch.add_column(sa.Column("idempotency_key", sa.String(255)))
        batch.create_unique_constraint(f"uq_{BLOBS}_idempotency_key", ["idempotency_key"])
        batch.drop_column("attempt")
    op.drop_table(KEYS, schema=SCHEMA)
