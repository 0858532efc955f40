"""``blobledger rm ID [--if-match VERSION]``: delete a document (only at that version)."""

from __future__ import annotations

import argparse

import httpx

from blobledger.cli._client import (
    add_connection_options,
    check,
    document_path,
    open_client,
    unreachable,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("rm", help="delete a document",
                                   description="Delete document ID.")
    parser.add_argument("id", metavar="ID")
    parser.add_argument("--if-match", metavar="VERSION",
                        help="delete only if the document is still at this version (ETag)")
    add_connection_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    headers = {}
    if args.if_match:
        version = str(args.if_match).strip().strip('"')
        headers["If-Match"] = f'"{version}"'
    with open_client(args) as client:
        try:
            check(client.delete(document_path(args.id), headers=headers))
        except httpx.HTTPError as exc:
            raise unreachable(args.url, exc) from None
    return 0
