"""``blobledger experiments``: re-run the article's measured cases on the configured Azure
account (``BLOBLEDGER_STORE_URL=azure://<container>``; the container name is the base of the
per-case containers, each created fresh and deleted afterwards)."""

from __future__ import annotations

import json
import sys

import click

from blobledger._base import extras
from blobledger.cli import fail, run_async, settings
from blobledger.cli._output import is_terminal, plain, table

AZURE = extras.STORE_EXTRAS["azure"][0]


@click.command(epilog="\b\nExamples:\n  blobledger experiments\n"
               "  blobledger experiments --only A,C --json")
@click.option("--json", "as_json", is_flag=True, help="print the results as JSON")
@click.option("--only", multiple=True, metavar="X",
              help="run only these cases (letters; repeatable or comma-separated)")
@run_async
async def command(as_json: bool, only: tuple[str, ...]) -> int:
    """Run the measured cases against the configured Azure store, each in its own
    temporary container."""
    # the cases drive the Azure SDK (the azure extra): without it, one line naming it
    extras.require(AZURE, "azure", "blobledger experiments")
    from blobledger.experiments import render_json, render_text, run_experiments

    results = await run_experiments(settings(), list(only) or None)
    if as_json:
        print(json.dumps(render_json(results), indent=2))
    elif is_terminal(sys.stdout):
        table("experiments", ["case", "title", "result", "measured"],
              [[r.letter, r.title, "error: " + r.error if r.error else "ok",
                "\n".join(r.lines)] for r in results])
    else:
        print(plain(render_text(results)), end="")
    failed = [f"{r.letter} ({r.error})" for r in results if r.error]
    if failed:
        return fail("experiments failed: " + "; ".join(failed))
    return 0


if extras.problem(AZURE, "azure", "blobledger experiments") is None:
    from blobledger.experiments import LETTERS

    command.help = (command.help or "") + f" Cases: {', '.join(LETTERS)}."
