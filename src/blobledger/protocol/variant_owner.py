"""A variant's owner: one version of a document, as a blob row's owner fields name it.

A variant (a derived image, :mod:`blobledger.variants`) is an attachment whose owner is
``(<documents table>, "<document id>:<version>", "variant:<name>:<box>.<format>.q<quality>")``:
the column names how it was made, so a changed setting makes a new variant instead of
serving the old one. Only the ``attached`` state holds a variant (the documents row names
none, :func:`blobledger.protocol.owners.owner_holds`); R4 and the delete move the attached
variants of the version they end to ``deleting`` in their own transaction
(:func:`detach_variants`), and the deletion path removes them after the grace.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, bindparam, select, update

from blobledger._base.variant_specs import VariantSpec
from blobledger.protocol.clock import at
from blobledger.protocol.models import BlobRow, BlobState, DocumentRow, DocumentStatus
from blobledger.protocol.owners import VARIANT_COLUMN, Owner

documents: Table = DocumentRow.__table__  # type: ignore[assignment]
blobs: Table = BlobRow.__table__  # type: ignore[assignment]
#: the owner table a variant's row names: the ledger's documents table
DOCUMENTS = DocumentRow.__tablename__
NOW = at("now_s")

_detach = update(blobs).where(
    blobs.c.owner_table == DOCUMENTS, blobs.c.owner_key == bindparam("o_key"),
    blobs.c.state == BlobState.ATTACHED.value,
).values(state=BlobState.DELETING.value, attempt=None, changed_at=NOW, lease_until=NOW)


def variant_owner(doc_id: str, version: int, spec: VariantSpec, fmt: str,
                  quality: int) -> Owner:
    """The owner of the variant ``spec`` of a document version, made as ``fmt``/``quality``."""
    return Owner(DOCUMENTS, version_key(doc_id, version),
                 f"{VARIANT_COLUMN}{spec.name}:{spec.width}x{spec.height}.{fmt}.q{quality}")


def version_key(doc_id: str, version: int) -> str:
    """The owner key of a document version: ``<id>:<version>``."""
    return f"{doc_id}:{version}"


def is_variant(owner: Owner) -> bool:
    return owner.table == DOCUMENTS and owner.column.startswith(VARIANT_COLUMN)


async def detach_variants(conn: Any, doc_id: str, version: int, times: dict[str, Any]) -> int:
    """Every variant attached to this document version ``attached -> deleting``, on the
    caller's connection inside its transaction (R4, the delete). The number moved."""
    result = await conn.execute(_detach, dict(o_key=version_key(doc_id, version), **times))
    return int(getattr(result, "rowcount", 0))


def version_alive(conn: Any, owner: Owner) -> bool:
    """Whether the document version a variant's owner names still exists, not pending (a
    sync function for ``run_sync``): an attached variant of a version gone is a leak."""
    doc_id, _, version = owner.key.rpartition(":")
    if not version.isdigit():
        return False
    found = conn.execute(select(documents.c.id).where(
        documents.c.id == doc_id, documents.c.version == int(version),
        documents.c.status != DocumentStatus.PENDING.value)).first()
    return found is not None
