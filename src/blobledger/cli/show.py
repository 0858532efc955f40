"""``blobledger show NAME|ID``: one ready document, found by its name or its id
(:mod:`._lookup`): its id, name, version, size, SHA-256, content type, state and
timestamps, one ``field: value`` line each (``--json``: the service's JSON, one line). A held
document is shown to its writer with its state ``held`` and each processor's state; one
its processors rejected is told in one line with the reason (exit 1).
Every value came from the server and is printed escaped (:mod:`._output`)."""

from __future__ import annotations

from typing import Any

import click
import httpx

from blobledger.cli._client import Connection, connection_options, open_client, unreachable
from blobledger.cli._lookup import find
from blobledger.cli._output import display_name, print_json
from blobledger.client._answers import DocumentAnswer


@click.command(epilog="\b\nExamples:\n  blobledger show reports/2026/q1.pdf\n"
               "  blobledger show 0f3c... --json | jq .version")
@click.argument("key", metavar="NAME|ID")
@click.option("--json", "as_json", is_flag=True, help="the document as one line of JSON")
@connection_options
def command(key: str, as_json: bool, url: str | None, token: str | None) -> int:
    """Show the document named NAME (or whose id is ID): id, name, version, size, SHA-256,
    content type, state and timestamps. Its version is what `put --replace` and
    `rm --if-match` expect."""
    connection = Connection.resolve(url, token)
    with open_client(connection) as client:
        try:
            doc, data = find(client, key)
        except httpx.TransportError as exc:
            raise unreachable(connection.url, exc) from None
    if as_json:
        print_json(data)
    else:
        for field, value in rows(doc):
            print(f"{field + ':':<14}{display_name(value)}")
    return 0


def rows(doc: DocumentAnswer) -> list[tuple[str, str]]:
    """The human view's lines; a value the server did not give reads ``unknown``."""
    def text(value: Any) -> str:
        return "unknown" if value is None else str(value)

    size = "unknown" if doc.size is None else f"{doc.size} bytes"
    found = [("id", doc.id), ("name", doc.name), ("version", str(doc.version)),
             ("size", size), ("sha256", text(doc.sha256)),
             ("content type", text(doc.content_type)), ("state", text(doc.status)),
             ("created", text(doc.created_at)), ("updated", text(doc.updated_at))]
    processors = (doc.model_extra or {}).get("processors")
    if isinstance(processors, dict) and processors:  # a held document, told its writer
        found.append(("processors", ", ".join(f"{name} {state}" for name, state
                                              in sorted(processors.items()))))
    return found
