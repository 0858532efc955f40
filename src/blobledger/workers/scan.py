"""The one streaming merge of a store's listing with the ``blobs`` table, by blob name.

Both sides arrive in code point order of the name: the store lists that way, and the table
is read in keyset pages ordered ``COLLATE "C"`` on PostgreSQL (SQLite's binary collation
already is). :func:`pages` reads any ``blobs`` query so; :func:`merged` walks the two
streams side by side and yields ``(row, blob)`` pairs, either side None where the other has
no partner. Memory stays bounded whatever the container holds. The reconciler and the
invariant checker both stand on these two; nothing here judges what a pair means.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from blobledger import telemetry
from blobledger.protocol.ledger import Ledger
from blobledger.protocol.models import BlobRow
from blobledger.stores.base import BlobInfo

PAGE = 500
R = TypeVar("R")


def name_order(ledger: Ledger) -> Any:
    """``blobs.name`` in the store's listing order (code points) on the ledger's database."""
    return BlobRow.name if ledger.db.is_sqlite else BlobRow.name.collate("C")


async def pages(
    ledger: Ledger, query: Any, *, span: str, page: int = PAGE
) -> AsyncIterator[Any]:
    """The rows of ``query`` (whose first column is the blob name) in listing order, read in
    keyset pages of ``page`` rows, a span named ``span`` per page."""
    column = name_order(ledger)
    base = query.order_by(column).limit(page)
    after: str | None = None
    while True:
        current = base if after is None else base.where(column > after)
        with telemetry.span(span, after=after) as traced:
            async with ledger.db.session(readonly=True) as session:
                found = (await session.execute(current)).all()
            traced.set("rows", len(found))
        for row in found:
            yield row
        if len(found) < page:
            return
        after = found[-1][0]


async def merged(
    rows: AsyncIterator[R], blobs: AsyncIterator[BlobInfo], name: Callable[[R], str]
) -> AsyncIterator[tuple[R | None, BlobInfo | None]]:
    """Pairs of a row and the blob of the same name, in name order; None for a missing side."""
    row = await anext(rows, None)
    blob = await anext(blobs, None)
    while row is not None or blob is not None:
        if blob is not None and (row is None or blob.name < name(row)):
            yield None, blob
            blob = await anext(blobs, None)
        elif row is not None and (blob is None or name(row) < blob.name):
            yield row, None
            row = await anext(rows, None)
        else:
            yield row, blob
            row, blob = await anext(rows, None), await anext(blobs, None)


def tagged(state: str | None, template: str = "tagged {state!r}") -> str:
    """How a blob's state tag reads in a finding: ``template`` with the state (``tagged
    'pending'``), or ``untagged`` when the blob has none."""
    return "untagged" if state is None else template.format(state=state)
