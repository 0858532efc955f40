"""``blobledger lifecycle-policy``: print the storage account's fallback cleanup rule."""

from __future__ import annotations

import argparse
import json
import sys
from urllib.parse import unquote, urlsplit

from blobledger.config import from_env
from blobledger.errors import ConfigError
from blobledger.lifecycle import parse_days
from blobledger.stores.azure.lifecycle import NOTE, build_policy
from blobledger.stores.s3.lifecycle import build_s3_policy

NOTE_S3 = ("this configuration is a fallback for what the sweeper missed, never the cleanup: "
           "run `blobledger sweep`; apply it with `aws s3api put-bucket-lifecycle-"
           "configuration`")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lifecycle-policy", help="print the Azure or S3 lifecycle rule (a fallback)",
        description="Print the lifecycle policy of the configured store (Azure, or S3 "
        "with BLOBLEDGER_STORE_URL=s3://...) deleting blobs tagged state=pending or "
        "state=deleting under the prefixes after N days (on S3 also aborting incomplete "
        "multipart uploads). A fallback for what the sweeper missed, never the cleanup.")
    parser.add_argument("--prefix", action="append", metavar="P",
                        help="blob-name prefix, repeatable (default: BLOBLEDGER_BLOB_PREFIX)")
    parser.add_argument("--days", required=True, metavar="N", help="whole days, at least 1")
    parser.add_argument("--container",
                        help="container (default: from BLOBLEDGER_STORE_URL azure://...)")
    parser.add_argument("--hierarchical-namespace", action="store_true",
                        help="the account has a hierarchical namespace (refused: no index "
                        "tags there)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    days = parse_days(args.days)
    settings = from_env()
    parts = urlsplit(settings.store_url)
    if args.container is None and parts.scheme == "s3":
        policy = build_s3_policy(unquote(parts.path), args.prefix or [settings.blob_prefix],
                                 days, sweep_after=settings.sweep_after)
        print(json.dumps(policy, indent=2))
        print(f"blobledger: note: {NOTE_S3}", file=sys.stderr)
        return 0
    container = args.container
    if container is None:
        parts = urlsplit(settings.store_url)
        if parts.scheme != "azure" or not parts.netloc:
            raise ConfigError("give --container (BLOBLEDGER_STORE_URL is not azure:// or "
                              "s3://...)")
        container = parts.netloc
    policy = build_policy(container, args.prefix or [settings.blob_prefix], days,
                          hierarchical_namespace=args.hierarchical_namespace,
                          sweep_after=settings.sweep_after)
    print(json.dumps(policy, indent=2))
    print(f"blobledger: note: {NOTE}", file=sys.stderr)
    return 0
