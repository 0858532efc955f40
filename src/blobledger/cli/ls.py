"""``blobledger ls [--prefix P]``: list ready documents, following every page.

Names are printed with every character that displays as something else or as nothing
(controls, bidirectional overrides, zero-width characters, line separators) escaped as
``\\uXXXX``: the service refuses them in new names, but older names may hold them."""

from __future__ import annotations

import argparse
import json
import unicodedata

import httpx

from blobledger.cli._client import add_connection_options, check, open_client, unreachable


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("ls", help="list documents",
                                   description="List ready documents in name order: id, "
                                   "version, size, last change, name (tab-separated).")
    parser.add_argument("--prefix", default="", help="only names starting with this")
    parser.add_argument("--page-size", type=int, default=100, help="documents per request")
    parser.add_argument("--json", action="store_true", help="one JSON document per line")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    cursor: str | None = None
    with open_client(args) as client:
        while True:
            params = {"prefix": args.prefix, "limit": str(args.page_size)}
            if cursor:
                params["cursor"] = cursor
            try:
                page = check(client.get("/documents", params=params)).json()
            except httpx.HTTPError as exc:
                raise unreachable(args.url, exc) from None
            for doc in page["items"]:
                if args.json:
                    print(json.dumps(doc))
                else:
                    print(f"{doc['id']}\t{doc['version']}\t{doc['size']}\t"
                          f"{doc['updated_at']}\t{display_name(str(doc['name']))}")
            cursor = page.get("next_cursor")
            if not cursor:
                return 0


#: characters shown escaped: controls, format characters (bidirectional overrides,
#: zero-width characters), separators, surrogates, private-use and unassigned code points
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def display_name(name: str) -> str:
    """The name with every invisible or direction-changing character as ``\\uXXXX``."""
    return "".join(
        (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}")
        if unicodedata.category(c) in _HIDDEN or c == "\\" else c
        for c in name)
