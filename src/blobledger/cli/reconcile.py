"""``blobledger reconcile``: compare the container with the database; optionally fix orphans.

Exit 0 when clean, 1 with findings, 2 when a ready document's blob is missing, 3 when the
database or the store is unreachable.
"""

from __future__ import annotations

import json

import click

from blobledger._base.durations import format_duration, parse_duration
from blobledger.cli import run_async
from blobledger.cli._output import Progress, display_name, plain
from blobledger.workers.reconciler import Finding, count_rows, reconcile

from ._worker import worker_ledger

EXAMPLES = """\b
Examples:
  blobledger reconcile
  blobledger reconcile --json --no-blocks
  blobledger reconcile --fix --older-than 6h
"""


@click.command(epilog=EXAMPLES)
@click.option("--json", "as_json", is_flag=True,
              help="one JSON object per finding, then the JSON summary")
@click.option("--fix", is_flag=True,
              help="delete orphans tagged pending or deleting or not tagged at all, and "
              "uncommitted bytes, older than the cutoff; retag committed the pending blob "
              "of an attached row")
@click.option("--older-than", metavar="DURATION",
              help="age an orphan must pass before --fix deletes it; not shorter than the "
              "upload deadline (default: BLOBLEDGER_SWEEP_AFTER)")
@click.option("--no-blocks", is_flag=True,
              help="skip the uncommitted-blocks check (one request per blob on Azure)")
@click.option("--prefix", help="blob-name prefix (default: BLOBLEDGER_BLOB_PREFIX/)")
@run_async
async def command(as_json: bool, fix: bool, older_than: str | None, no_blocks: bool,
                  prefix: str | None) -> int:
    """Stream the container listing against the blobs table. Exit 0 when clean, 1 with
    findings, 2 when a ready document's blob is missing."""
    async with worker_ledger() as ledger:
        cutoff = (ledger.settings.sweep_after if older_than is None
                  else parse_duration(older_than, what="--older-than"))

        def show(finding: Finding) -> None:
            if as_json:
                print(json.dumps({"event": "finding", **finding.as_dict()}), flush=True)
                return
            age = ("" if finding.age_seconds is None
                   else f" (age {format_duration(round(max(finding.age_seconds, 0)))})")
            fixed = ("" if not finding.fixed else " [retagged committed]"
                     if finding.category == "mismatch" else " [deleted]")
            print(plain(f"{finding.category:<13} {display_name(finding.name)}: "
                        f"{finding.detail}{age}{fixed}"), flush=True)

        scope = ledger.settings.blob_prefix + "/" if prefix is None else prefix
        progress = Progress("reconcile", None, unit="rows")
        if progress.enabled:  # a bar on a terminal: rows scanned of the total, blobs seen
            progress.total = await count_rows(ledger, scope)
        try:
            report = await reconcile(ledger, fix=fix, older_than=cutoff, prefix=scope,
                                     on_finding=show, blocks=not no_blocks,
                                     on_progress=progress.scanned)
        finally:
            progress.finish()
        print(report.to_log(), flush=True)
        return report.exit_code
