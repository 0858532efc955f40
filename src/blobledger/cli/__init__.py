"""The ``blobledger`` command: one module per subcommand in this package, found by name.

A subcommand module defines ``register(subparsers) -> None``, which adds its parser and sets
``handler`` (a callable taking the parsed args and returning an exit code, or a coroutine
function, run with asyncio). Errors a user can act on end as one line and a non-zero exit.
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

from blobledger.errors import BlobLedgerError, ConfigError

EXIT_ERROR = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="blobledger",
        description="Keep a database and an object store consistent through every crash.",
    )
    parser.add_argument("--log-level", default="WARNING",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
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
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    handler = args.handler
    try:
        if inspect.iscoroutinefunction(handler):
            return int(asyncio.run(handler(args)) or 0)
        return int(handler(args) or 0)
    except ConfigError as exc:
        return fail(str(exc), EXIT_USAGE)
    except BlobLedgerError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        return 0


def run() -> None:
    sys.exit(main())
