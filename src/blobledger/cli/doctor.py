"""``blobledger doctor``: check that the configured store has what the protocol relies on,
as a pass/fail table (drawn with rich on a terminal); a failed must-have exits non-zero with
one line naming it. It creates no store: a local store's folder that does not exist is a
configuration error naming it."""

from __future__ import annotations

import json
import sys

import click

from blobledger.cli import fail, run_async, settings
from blobledger.cli._output import is_terminal, plain, table
from blobledger.cli._worker import nothing_created
from blobledger.workers.doctor import run_doctor


@click.command(epilog="\b\nExamples:\n  blobledger doctor\n  blobledger doctor --json")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@run_async
async def command(as_json: bool) -> int:
    """Probe the configured store (BLOBLEDGER_STORE_URL) for create-only writes, index
    tags, tag-guarded deletes and tag updates, soft delete and the lifecycle rule. Every
    probe blob is deleted again."""
    with nothing_created("doctor"):
        report = await run_doctor(settings(), create=False)
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    elif is_terminal(sys.stdout):
        table(f"store: {report.store}", ["check", "must", "result", "detail"],
              [[c.name, "yes" if c.must else "no", c.status.upper(), c.detail]
               for c in report.checks])
    else:
        print(plain(report.render()), end="")
    if report.failed:
        return fail(f"must-have checks failed: {report.summary()}")
    return 0
