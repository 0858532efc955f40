"""``blobledger rm ID [--if-match VERSION]``: delete a document (only at that version)."""

from __future__ import annotations

import click
import httpx

from blobledger.cli._client import Connection, connection_options, open_client, unreachable


@click.command(epilog="\b\nExamples:\n  blobledger rm 0f3c...\n"
               "  blobledger rm 0f3c... --if-match 3")
@click.argument("doc_id", metavar="ID")
@click.option("--if-match", metavar="VERSION",
              help="delete only if the document is still at this version (ETag)")
@connection_options
def command(doc_id: str, if_match: str | None, url: str | None, token: str | None) -> int:
    """Delete document ID."""
    connection = Connection.resolve(url, token)
    version = if_match.strip().strip('"') if if_match else None
    with open_client(connection) as client:
        try:
            client.delete(doc_id, if_match=version)
        except httpx.HTTPError as exc:
            raise unreachable(connection.url, exc) from None
    return 0
