"""``blobledger lifecycle-policy``: print the storage account's fallback cleanup rule."""

from __future__ import annotations

import json
import sys
from urllib.parse import unquote, urlsplit

import click

from blobledger.cli import settings as current_settings
from blobledger.errors import ConfigError
from blobledger.workers.lifecycle import parse_days
from blobledger.workers.lifecycle.azure import NOTE, build_policy
from blobledger.workers.lifecycle.s3 import build_s3_policy

NOTE_S3 = ("this configuration is a fallback for what the sweeper missed, never the cleanup: "
           "run `blobledger sweep`; apply it with `aws s3api put-bucket-lifecycle-"
           "configuration`")


EXAMPLES = """\b
Examples:
  blobledger lifecycle-policy --days 7
  blobledger lifecycle-policy --days 7 --container docs --prefix documents --prefix archive
"""


@click.command(epilog=EXAMPLES)
@click.option("--prefix", "prefixes", multiple=True, metavar="P",
              help="blob-name prefix, repeatable (default: BLOBLEDGER_BLOB_PREFIX)")
@click.option("--days", required=True, metavar="N", help="whole days, at least 1")
@click.option("--container", help="container (default: from BLOBLEDGER_STORE_URL azure://...)")
@click.option("--hierarchical-namespace", is_flag=True,
              help="the account has a hierarchical namespace (refused: no index tags there)")
def command(prefixes: tuple[str, ...], days: str, container: str | None,
            hierarchical_namespace: bool) -> int:
    """Print the lifecycle policy of the configured store (Azure, or S3 with
    BLOBLEDGER_STORE_URL=s3://...) deleting blobs tagged state=pending or state=deleting
    under the prefixes after N days (on S3 also aborting incomplete multipart uploads).
    A fallback for what the sweeper missed, never the cleanup."""
    return policy(list(prefixes) or None, days, container, hierarchical_namespace)


def policy(prefixes: list[str] | None, days_text: str, container: str | None,
           hierarchical_namespace: bool) -> int:
    days = parse_days(days_text)
    settings = current_settings()
    parts = urlsplit(settings.store_url)
    if container is None and parts.scheme == "s3":
        policy = build_s3_policy(unquote(parts.path), prefixes or [settings.blob_prefix],
                                 days, sweep_after=settings.sweep_after,
                                 retag_warn_after=settings.retag_warn_after)
        print(json.dumps(policy, indent=2))
        print(f"blobledger: note: {NOTE_S3}", file=sys.stderr)
        return 0
    if container is None:
        parts = urlsplit(settings.store_url)
        if parts.scheme != "azure" or not parts.netloc:
            raise ConfigError("give --container (BLOBLEDGER_STORE_URL is not azure:// or "
                              "s3://...)")
        container = parts.netloc
    policy = build_policy(container, prefixes or [settings.blob_prefix], days,
                          hierarchical_namespace=hierarchical_namespace,
                          sweep_after=settings.sweep_after,
                          retag_warn_after=settings.retag_warn_after)
    print(json.dumps(policy, indent=2))
    print(f"blobledger: note: {NOTE}", file=sys.stderr)
    return 0
