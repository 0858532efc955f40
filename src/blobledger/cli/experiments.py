"""``blobledger experiments``: re-run the article's measured cases on the configured Azure
account (``BLOBLEDGER_STORE_URL=azure://<container>``; the container name is the base of the
per-case containers, each created fresh and deleted afterwards)."""

from __future__ import annotations

import argparse
import json

from blobledger.cli import fail
from blobledger.config import from_env
from blobledger.experiments import LETTERS, render_json, render_text, run_experiments


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "experiments", help="re-run the measured storage behaviours the protocol rests on",
        description="Run the measured cases (" + ", ".join(LETTERS) + ") against the "
        "configured Azure store, each in its own temporary container.")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--only", action="append", metavar="X",
                        help="run only these cases (letters; repeatable or comma-separated)")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    results = await run_experiments(from_env(), args.only)
    if args.json:
        print(json.dumps(render_json(results), indent=2))
    else:
        print(render_text(results), end="")
    failed = [f"{r.letter} ({r.error})" for r in results if r.error]
    if failed:
        return fail("experiments failed: " + "; ".join(failed))
    return 0
