"""``blobledger ls [--prefix P]``: list ready documents, following every page: a table on a
terminal, tab-separated lines otherwise (``--json``: one JSON document per line).

Names are printed with every character that displays as something else or as nothing
(controls, bidirectional overrides, zero-width characters, line separators) escaped as
``\\uXXXX``: the service refuses them in new names, but older names may hold them; every
other field too (ids, dates), since a server may put anything in them. A page that is not a
page of documents, a cursor given twice or more than ``--max-pages`` pages end the listing
with one error line (exit 1), after the rows already printed."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

from blobledger.cli._client import ClientError, Connection, connection_options, open_client
from blobledger.cli._output import display_name, fields, is_terminal, print_json, table
from blobledger.client import Client
from blobledger.client._answers import DocumentAnswer

#: the most pages one listing follows by default (``--max-pages``)
MAX_PAGES = 10_000


@click.command(epilog="\b\nExamples:\n  blobledger ls --prefix reports/\n"
               "  blobledger ls --json | jq -r .id")
@click.option("--prefix", default="", help="only names starting with this")
@click.option("--page-size", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="documents per request")
@click.option("--max-pages", type=click.IntRange(min=1), default=MAX_PAGES, show_default=True,
              help="stop with an error after this many pages")
@click.option("--json", "as_json", is_flag=True, help="one JSON document per line")
@connection_options
def command(prefix: str, page_size: int, max_pages: int, as_json: bool, url: str | None,
            token: str | None) -> int:
    """List ready documents in name order: id, version, size, last change, name
    (tab-separated)."""
    connection = Connection.resolve(url, token)
    rich = not as_json and is_terminal(sys.stdout)
    rows: list[list[str]] = []
    with open_client(connection) as client:
        for page in pages(client, prefix, page_size, max_pages):
            for doc in page:
                data = doc.raw
                if as_json:
                    print_json(data)
                elif rich:
                    size = f"{doc.size:,}" if doc.size is not None else ""
                    rows.append([doc.id, str(doc.version), size, str(doc.updated_at or ""),
                                 doc.name])
                else:
                    print(fields([doc.id, doc.version, "" if doc.size is None else doc.size,
                                  doc.updated_at or "", doc.name]))
    if rich:
        table(None, ["id", "version", "size", "updated", "name"], rows, multiline=False)
    return 0


def pages(client: Client, prefix: str, page_size: int,
          max_pages: int) -> Iterator[list[DocumentAnswer]]:
    """Every page, each checked, following ``next_cursor`` (the client refuses a cursor the
    server gave before: a listing that would never end); more than ``max_pages`` pages is
    an error."""
    cursors: set[str] = set()
    for number, page in enumerate(client.pages(prefix, page_size=page_size), 1):
        yield page.items
        cursor = page.next_cursor
        if cursor and cursor not in cursors and number >= max_pages:
            raise ClientError(f"stopped after {max_pages:,} pages (--max-pages): the listing "
                              "goes on")
        cursors.add(cursor or "")


__all__ = ["command", "display_name"]
