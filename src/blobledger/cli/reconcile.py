"""``blobledger reconcile``: compare the container with the database; optionally fix orphans."""

from __future__ import annotations

import argparse
import json

from blobledger.durations import format_duration, parse_duration
from blobledger.reconciler import Finding, reconcile

from ._worker import worker_ledger


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reconcile", help="compare the container with the database",
        description="Stream the container listing against the blobs table. Exit 0 when "
        "clean, 1 with findings, 2 when a ready document's blob is missing.")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per finding, then the JSON summary")
    parser.add_argument("--fix", action="store_true",
                        help="delete orphans tagged pending or deleting, and uncommitted "
                        "bytes, older than the cutoff")
    parser.add_argument("--older-than", metavar="DURATION",
                        help="age an orphan must pass before --fix deletes it; not shorter "
                        "than the upload deadline (default: BLOBLEDGER_SWEEP_AFTER)")
    parser.add_argument("--no-blocks", action="store_true",
                        help="skip the uncommitted-blocks check (one request per blob on Azure)")
    parser.add_argument("--prefix", help="blob-name prefix (default: BLOBLEDGER_BLOB_PREFIX/)")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    async with worker_ledger() as ledger:
        older_than = (ledger.settings.sweep_after if args.older_than is None
                      else parse_duration(args.older_than, what="--older-than"))

        def show(finding: Finding) -> None:
            if args.json:
                print(json.dumps({"event": "finding", **finding.as_dict()}), flush=True)
                return
            age = ("" if finding.age_seconds is None
                   else f" (age {format_duration(round(max(finding.age_seconds, 0)))})")
            fixed = " [deleted]" if finding.fixed else ""
            print(f"{finding.category:<13} {finding.name}: {finding.detail}{age}{fixed}",
                  flush=True)

        report = await reconcile(ledger, fix=args.fix, older_than=older_than,
                                 prefix=args.prefix, on_finding=show,
                                 blocks=not args.no_blocks)
        print(report.to_log(), flush=True)
        return report.exit_code
