"""Core statements of the create path, built once.

Building an ORM statement per call (and its cache key) cost more CPU than the database
round trip itself; these are compiled once per dialect and executed with parameters.
"""

from __future__ import annotations

from sqlalchemy import Table, bindparam, insert, update

from blobledger.models import BlobRow, BlobState, DocumentRow, DocumentStatus

documents: Table = DocumentRow.__table__  # type: ignore[assignment]
blobs: Table = BlobRow.__table__  # type: ignore[assignment]

#: C1: the pending document and its pending blob row (parameters: column names)
insert_document = insert(documents)
insert_blob = insert(blobs)

#: C4: the blob row committed (parameters: b_name, b_size, b_sha256, b_md5, b_now)
commit_blob = (
    update(blobs)
    .where(blobs.c.name == bindparam("b_name"), blobs.c.state == BlobState.PENDING.value)
    .values(state=BlobState.COMMITTED.value, size=bindparam("b_size"),
            sha256=bindparam("b_sha256"), md5=bindparam("b_md5"),
            changed_at=bindparam("b_now"), lease_until=bindparam("b_now"))
)

#: C4: the document ready, returned (parameters: b_id, b_name, b_size, b_sha256, b_md5, b_now)
ready_document = (
    update(documents)
    .where(documents.c.id == bindparam("b_id"),
           documents.c.status == DocumentStatus.PENDING.value,
           documents.c.blob_name == bindparam("b_name"))
    .values(status=DocumentStatus.READY.value, size=bindparam("b_size"),
            sha256=bindparam("b_sha256"), md5=bindparam("b_md5"),
            updated_at=bindparam("b_now"))
    .returning(*documents.c)
)
