"""``blobledger check``: the protocol's invariants on the configured database and store.

Exit 0 when nothing is violated, 1 when something is; configuration errors end as one line.
It creates nothing: a database or a store that does not exist is a configuration error
naming it (:func:`blobledger.cli._worker.nothing_created`). The report begins with the
database and the store it looked at.
"""

from __future__ import annotations

import json
import sys

import click
from sqlalchemy.exc import SQLAlchemyError

from blobledger.cli import EXIT_USAGE, fail, run_async, settings
from blobledger.cli._output import Progress, is_terminal, plain, table
from blobledger.cli._worker import nothing_created
from blobledger.db import redacted
from blobledger.protocol.ledger import Ledger
from blobledger.workers.invariants import check
from blobledger.workers.reconciler import count_rows


@click.command(epilog="\b\nExamples:\n  blobledger check\n  blobledger check --settled --json")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--settled", is_flag=True,
              help="also check I4: no stale pending/deleting rows and no blob without a row "
              "(meaningful once the sweeper and the deletion path have run past their "
              "cutoffs)")
@run_async
async def command(as_json: bool, settled: bool) -> int:
    """Check invariants I1, I3, I5 (and I4 with --settled) on the configured database and
    store. Exit status: 0 no violation, 1 violations found, 2 configuration error, 3 the
    database or the store unreachable."""
    try:
        with nothing_created("check"):
            async with Ledger.from_settings(settings(), migrate=False,
                                            create=False) as ledger:
                await ledger.store.probe()
                progress = Progress("check", None, unit="rows")
                if progress.enabled:  # a bar on a terminal: rows scanned of the total
                    progress.total = await count_rows(ledger,
                                                      ledger.settings.blob_prefix + "/")
                try:
                    report = await check(ledger, settled=settled,
                                         on_progress=progress.scanned)
                finally:
                    progress.finish()
                looked_at = (f"database: {redacted(ledger.db.url)}\n"
                             f"store: {ledger.store.url}")
    except SQLAlchemyError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return fail(f"database error on {redacted(settings().database_url)} (is it migrated? "
                    f"run blobledger migrate): {reason[:200]}", EXIT_USAGE)
    if not as_json:
        print(plain(looked_at))
    if as_json:
        print(json.dumps(report.to_json(), indent=2))
    elif is_terminal(sys.stdout):
        summary = report.render().splitlines()
        print("\n".join(summary[:4]))
        if report.violations:
            table(f"{len(report.violations)} violation(s)", ["invariant", "subject", "detail"],
                  [[v.invariant, v.subject, v.detail] for v in report.violations])
        else:
            print("no violations")
    else:
        print(plain(report.render()))
    return 0 if report.ok else 1
