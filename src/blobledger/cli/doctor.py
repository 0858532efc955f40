"""``blobledger doctor``: check that the configured store has what the protocol relies on,
as a pass/fail table; a failed must-have exits non-zero with one line naming it."""

from __future__ import annotations

import argparse
import json

from blobledger.cli import fail
from blobledger.config import from_env
from blobledger.doctor import run_doctor


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor", help="check the configured store's features",
        description="Probe the configured store (BLOBLEDGER_STORE_URL) for create-only "
        "writes, index tags, tag-guarded deletes and tag updates, soft delete and the "
        "lifecycle rule. Every probe blob is deleted again.")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    report = await run_doctor(from_env())
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(report.render(), end="")
    if report.failed:
        return fail(f"must-have checks failed: {report.summary()}")
    return 0
