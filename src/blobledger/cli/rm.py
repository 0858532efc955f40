"""``blobledger rm ID [--if-match VERSION]``: delete a document (only at that version)."""

from __future__ import annotations

import click
import httpx

from blobledger.cli._client import (
    Connection,
    check,
    connection_options,
    document_path,
    open_client,
    unreachable,
)


@click.command(epilog="\b\nExamples:\n  blobledger rm 0f3c...\n"
               "  blobledger rm 0f3c... --if-match 3")
@click.argument("doc_id", metavar="ID")
@click.option("--if-match", metavar="VERSION",
              help="delete only if the document is still at this version (ETag)")
@connection_options
def command(doc_id: str, if_match: str | None, url: str | None, token: str | None) -> int:
    """Delete document ID."""
    connection = Connection.resolve(url, token)
    headers = {}
    if if_match:
        version = if_match.strip().strip('"')
        headers["If-Match"] = f'"{version}"'
    with open_client(connection) as client:
        try:
            check(client.delete(document_path(doc_id), headers=headers))
        except httpx.HTTPError as exc:
            raise unreachable(connection.url, exc) from None
    return 0
