"""the deletion grace counts from the commit (PostgreSQL)

Every protocol timestamp is ``now()``, which PostgreSQL fixes at the start of the
transaction. A blob moved to ``deleting`` inside an application's long transaction (a
Django save, a SQLAlchemy session's flush) was thus ``deleting`` since that transaction
began, while every other reader still saw it attached until the commit: its grace, and so
the lifetime of a read URL signed meanwhile, was cut short by the transaction's length.

A deferred constraint trigger on ``blobs`` runs at the commit of every transaction that moved
a row into ``deleting`` and moves its ``changed_at`` (and ``lease_until``) forward by the time
that transaction has run (``clock_timestamp() - now()``), keeping any clock offset the
statement added. SQLite has no deferred trigger: there the grace counts from the statement
(docs/django.md says what that asks of a transaction). Rows already ``deleting`` keep theirs.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

from blobledger.protocol.models import SCHEMA, table_name

BLOBS = table_name("blobs")
_QUALIFIED = f"{SCHEMA}.{BLOBS}" if SCHEMA else BLOBS
FUNCTION = f"{_QUALIFIED}_grace_from_commit"
TRIGGER = f"{BLOBS}_grace_from_commit"

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {_QUALIFIED}
       SET changed_at = changed_at + (clock_timestamp() - now()),
           lease_until = lease_until + (clock_timestamp() - now())
     WHERE name = NEW.name AND state = 'deleting' AND changed_at = NEW.changed_at;
    RETURN NULL;
END $$""")
    op.execute(f"""
CREATE CONSTRAINT TRIGGER {TRIGGER} AFTER UPDATE OF state ON {_QUALIFIED}
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (NEW.state = 'deleting' AND OLD.state IS DISTINCT FROM 'deleting')
    EXECUTE FUNCTION {FUNCTION}()""")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {_QUALIFIED}")
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
