"""``blobledger ls [--prefix P]``: list ready documents, following every page: a table on a
terminal, tab-separated lines otherwise (``--json``: one JSON document per line).

Names are printed with every character that displays as something else or as nothing
(controls, bidirectional overrides, zero-width characters, line separators) escaped as
``\\uXXXX``: the service refuses them in new names, but older names may hold them."""

from __future__ import annotations

import json
import sys

import click
import httpx

from blobledger.cli._client import (
    Connection,
    check,
    connection_options,
    open_client,
    unreachable,
)
from blobledger.cli._output import display_name, is_terminal, table


@click.command(epilog="\b\nExamples:\n  blobledger ls --prefix reports/\n"
               "  blobledger ls --json | jq -r .id")
@click.option("--prefix", default="", help="only names starting with this")
@click.option("--page-size", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="documents per request")
@click.option("--json", "as_json", is_flag=True, help="one JSON document per line")
@connection_options
def command(prefix: str, page_size: int, as_json: bool, url: str | None,
            token: str | None) -> int:
    """List ready documents in name order: id, version, size, last change, name
    (tab-separated)."""
    connection = Connection.resolve(url, token)
    cursor: str | None = None
    rich = not as_json and is_terminal(sys.stdout)
    rows: list[list[str]] = []
    with open_client(connection) as client:
        while True:
            params = {"prefix": prefix, "limit": str(page_size)}
            if cursor:
                params["cursor"] = cursor
            try:
                page = check(client.get("/documents", params=params)).json()
            except httpx.HTTPError as exc:
                raise unreachable(connection.url, exc) from None
            for doc in page["items"]:
                if as_json:
                    print(json.dumps(doc))
                elif rich:
                    rows.append([str(doc["id"]), str(doc["version"]), f"{doc['size']:,}",
                                 str(doc["updated_at"]), str(doc["name"])])
                else:
                    print(f"{doc['id']}\t{doc['version']}\t{doc['size']}\t"
                          f"{doc['updated_at']}\t{display_name(str(doc['name']))}")
            cursor = page.get("next_cursor")
            if not cursor:
                break
    if rich:
        table(None, ["id", "version", "size", "updated", "name"], rows)
    return 0

__all__ = ["command", "display_name"]
