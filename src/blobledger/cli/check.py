"""``blobledger check``: the protocol's invariants on the configured database and store.

Exit 0 when nothing is violated, 1 when something is; configuration errors end as one line.
"""

from __future__ import annotations

import argparse
import json

from sqlalchemy.exc import SQLAlchemyError

from blobledger.cli import EXIT_USAGE, fail
from blobledger.invariants import check
from blobledger.ledger import Ledger


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check", help="check the invariants on the live database and store",
        description="Check invariants I1, I3, I5 (and I4 with --settled) on the database "
        "and store named by BLOBLEDGER_DATABASE_URL and BLOBLEDGER_STORE_URL. Exit status: "
        "0 no violation, 1 violations found, 2 configuration error, 3 the database or the "
        "store unreachable.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--settled", action="store_true",
        help="also check I4: no stale pending/deleting rows and no blob without a row "
        "(meaningful once the sweeper and the deletion path have run past their cutoffs)")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    try:
        async with Ledger.from_env(migrate=False) as ledger:
            report = await check(ledger, settled=args.settled)
    except SQLAlchemyError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return fail(f"database error (is it migrated? run blobledger migrate): {reason[:200]}",
                    EXIT_USAGE)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.render())
    return 0 if report.ok else 1
