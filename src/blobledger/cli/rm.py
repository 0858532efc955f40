"""``blobledger rm NAME|ID [--if-match VERSION]``: delete a document, found by its name or
its id as ``show`` finds it (:mod:`._lookup`), only at that version if given."""

from __future__ import annotations

import click
import httpx

from blobledger.cli._client import Connection, connection_options, open_client, unreachable
from blobledger.cli._lookup import find


@click.command(epilog="\b\nExamples:\n  blobledger rm reports/2026/q1.pdf\n"
               "  blobledger rm 0f3c... --if-match 3")
@click.argument("key", metavar="NAME|ID")
@click.option("--if-match", metavar="VERSION",
              help="delete only if the document is still at this version (ETag)")
@connection_options
def command(key: str, if_match: str | None, url: str | None, token: str | None) -> int:
    """Delete the document named NAME (or whose id is ID)."""
    connection = Connection.resolve(url, token)
    version = if_match.strip().strip('"') if if_match else None
    with open_client(connection) as client:
        try:
            doc, _ = find(client, key)
            client.delete(doc.id, if_match=version)
        except httpx.HTTPError as exc:
            raise unreachable(connection.url, exc) from None
    return 0
