"""The ``blobledger`` command: one module per subcommand in this package, found by name.

A subcommand module defines ``register(subparsers) -> None``, which adds its parser and sets
``handler`` (a callable taking the parsed args and returning an exit code, or a coroutine
function, run with asyncio). Errors a user can act on end as one line and a non-zero exit:
2 for a configuration error, 3 when the database or the store cannot be reached (retry
later), 1 for the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import pkgutil
import sys
from collections.abc import Sequence

from blobledger.errors import (
    BlobLedgerError,
    ConfigError,
    DatabaseUnavailable,
    StoreUnavailable,
)

EXIT_ERROR = 1
EXIT_USAGE = 2
#: the database or the store is unreachable (an outage, not a mistake: retry later)
EXIT_UNAVAILABLE = 3


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; given the command's name, only that subcommand's module is imported (a
    worker need not load the HTTP service's dependencies)."""
    parser = argparse.ArgumentParser(
        prog="blobledger",
        description="Keep a database and an object store consistent through every crash.",
    )
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    wanted = command.replace("-", "_") if command else None
    if wanted and any(m.name == wanted for m in modules):
        modules = [m for m in modules if m.name == wanted]
    for module in modules:
        if module.name.startswith("_"):
            continue
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        register = getattr(loaded, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def fail(message: str, code: int = EXIT_ERROR) -> int:
    """Print one readable line to stderr and return the exit code."""
    print(f"blobledger: error: {message}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in arguments if not a.startswith("-")), None)
    if command is not None and arguments.index(command) > 0 and arguments[
            arguments.index(command) - 1] == "--log-level":
        command = None  # a value, not the command: load every subcommand
    parser = build_parser(command)
    args = parser.parse_args(arguments)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    handler = args.handler
    try:
        if inspect.iscoroutinefunction(handler):
            return int(asyncio.run(handler(args)) or 0)
        return int(handler(args) or 0)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    except (DatabaseUnavailable, StoreUnavailable) as exc:
        return fail(_one_line(str(exc)), EXIT_UNAVAILABLE)
    except BlobLedgerError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        return 0


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "unreachable"


def run() -> None:
    sys.exit(main())
