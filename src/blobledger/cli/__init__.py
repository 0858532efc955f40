"""The ``blobledger`` command, on Click: an explicit command table, loaded lazily.

Each subcommand lives in its own module and is named in :data:`COMMANDS`; only the module of
the command being run is imported (a worker does not load the HTTP service). Every module
defines ``command``, a :class:`click.Command`.

Exit codes, for every command (``check`` and ``reconcile`` add their own meanings, below):

====  ======================================================================================
code  meaning
====  ======================================================================================
0     done; nothing found
1     findings, or a failure (a refused request, a failed must-have, an invariant broken)
2     usage or configuration: a bad option or setting, a database or store that does not
      exist, credentials refused; ``reconcile``: a ready document's blob is missing (data
      loss, look now)
3     the database, the store or the service is unreachable (an outage, not a mistake:
      retry later)
130   interrupted
====  ======================================================================================

The status of an error is :data:`EXIT_STATUS`'s, and nowhere else's. Errors a user can act
on end as one line on stderr, ``blobledger: error: ...`` (a
configuration with several mistakes: one such line per mistake), its control and
direction-changing characters escaped (:func:`fail`).
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import importlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import click

from blobledger import __version__
from blobledger.errors import (
    BlobLedgerError,
    BucketNotEmpty,
    ConfigError,
    DatabaseUnavailable,
    StoreUnavailable,
)

if TYPE_CHECKING:
    from blobledger.config import Settings

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
#: the database or the store is unreachable (an outage, not a mistake: retry later)
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130


class ClientError(BlobLedgerError):
    """A request the service refused or that could not be made (one line, exit 1)."""


class Unreachable(ClientError):
    """The service could not be reached (one line, exit 3: an outage, or the wrong URL)."""


#: The one mapping from the kind of an error to the exit status (most specific kind first):
#: a mistake in the settings (a value, a database or store that does not exist, credentials
#: refused) is 2, an outage 3, any other failure 1.
EXIT_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (ConfigError, EXIT_USAGE),
    (BucketNotEmpty, EXIT_USAGE),
    (DatabaseUnavailable, EXIT_UNAVAILABLE),
    (StoreUnavailable, EXIT_UNAVAILABLE),
    (Unreachable, EXIT_UNAVAILABLE),
    (BlobLedgerError, EXIT_ERROR),
)


def exit_status(exc: BaseException) -> int:
    """The exit status of a command ended by ``exc`` (:data:`EXIT_STATUS`)."""
    return next((code for kind, code in EXIT_STATUS if isinstance(exc, kind)), EXIT_ERROR)

#: the command table: name → (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("serve", "run the HTTP service"),
    "migrate": ("migrate", "apply database migrations"),
    "put": ("put", "upload a file (--replace: new bytes for a document)"),
    "get": ("get", "download a document"),
    "ls": ("ls", "list documents"),
    "show": ("show", "show one document, by name or id"),
    "rm": ("rm", "delete a document"),
    "buckets": ("buckets", "create, list, show, change and delete buckets"),
    "sweep": ("sweep", "sweep stale uploads and delete released blobs"),
    "reconcile": ("reconcile", "compare the container with the database"),
    "events": ("events", "list, show, replay and deliver events"),
    "check": ("check", "check the invariants on the live database and store"),
    "variants": ("variants", "make the derived images of documents now"),
    "doctor": ("doctor", "check the configured store's features"),
    "experiments": ("experiments", "re-run the measured storage behaviours"),
    "lifecycle-policy": ("lifecycle_policy", "print the Azure or S3 lifecycle rule"),
    "config": ("config", "print the effective settings, secrets masked"),
    "completion": ("completion", "print the shell completion script"),
}
#: other names of commands: alias → the command's name in :data:`COMMANDS`
ALIASES: dict[str, str] = {"list": "ls", "delete": "rm"}

P = ParamSpec("P")
R = TypeVar("R")


class State:
    """What the root options set up for the subcommands: the settings, loaded on first use
    (``--help`` needs none) and checked once."""

    def __init__(self, config_file: Path | None, env_file: Path | None) -> None:
        self.config_file = config_file
        self.env_file = env_file
        self._settings: Settings | None = None

    @classmethod
    def of(cls, settings: Settings) -> State:
        """The state of a command run with these settings, read elsewhere (Django's
        management commands: from ``settings.py``)."""
        state = cls(None, None)
        state._settings = settings
        return state

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            from blobledger.config import load_settings

            self._settings = load_settings(config_file=self.config_file,
                                           env_file=self.env_file)
            if self._settings.otel:
                from blobledger.telemetry import setup_sdk

                setup_sdk()
        return self._settings


def settings() -> Settings:
    """The effective settings of the running command."""
    state = click.get_current_context().find_object(State)
    if state is None:  # a command invoked on its own, in tests
        state = State(None, Path(".env"))
    return state.settings


class LazyGroup(click.Group):
    """The command table of :data:`COMMANDS`, each module imported only when needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(ALIASES.get(cmd_name, cmd_name))
        if entry is None:
            return None
        module = importlib.import_module(f"{__name__}.{entry[0]}")
        command: click.Command = module.command
        return command

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command is a usage error that suggests the closest ones (as Click
        does for options): ``No such command 'lst'. Did you mean 'ls'?``."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            raise click.UsageError(f"No such command {name!r}.{suggestion(name)}", ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the table's one-liners: listing the commands imports none of them
        also = {command: alias for alias, command in ALIASES.items()}
        with formatter.section("Commands"):
            formatter.write_dl([(name, f"{text} (also: {also[name]})" if name in also else text)
                                for name, (_, text) in COMMANDS.items()])


def suggestion(name: str) -> str:
    """`` Did you mean 'ls'?`` for a mistyped command (an alias counts as its command);
    empty when nothing is close."""
    candidates = {**{command: command for command in COMMANDS}, **ALIASES}
    close = list(dict.fromkeys(
        candidates[match] for match in difflib.get_close_matches(name, list(candidates))))
    if not close:
        return ""
    if len(close) == 1:
        return f" Did you mean {close[0]!r}?"
    return f" Did you mean one of: {', '.join(repr(c) for c in close)}?"


EPILOG = """\b
Examples:
  blobledger serve --port 8000
  blobledger put report.pdf --name reports/2026/q1.pdf
  blobledger ls --prefix reports/
  blobledger sweep --interval 5m
  blobledger --config blobledger.toml config

\b
Exit codes: 0 ok, 1 findings or failure, 2 usage or configuration,
3 the database, the store or the service unreachable (see the README).
"""


@click.group(cls=LazyGroup, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="a TOML settings file (under the environment and .env)")
@click.option("--env-file", type=click.Path(dir_okay=False, path_type=Path),
              default=Path(".env"), show_default=True,
              help="a dotenv file of BLOBLEDGER_* settings, read when it exists")
@click.option("--log-level", default="WARNING", show_default=True,
              type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              help="log verbosity")
@click.option("--log-format", default="text", show_default=True,
              type=click.Choice(["text", "json"]),
              help="json: one JSON object per line and event")
@click.version_option(version=__version__, message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None, env_file: Path, log_level: str,
        log_format: str) -> None:
    """Keep a database and an object store consistent through every crash.

    Settings come from BLOBLEDGER_* environment variables, a .env file and a
    TOML file (--config); `blobledger config` shows what is in effect."""
    from blobledger._base.logs import setup_logging

    setup_logging(log_level.upper(), log_format)
    ctx.obj = State(config_file, env_file)


def run_async(function: Callable[P, Awaitable[R]]) -> Callable[P, R]:
    """A coroutine function as a Click callback (run with asyncio)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        async def main() -> R:
            return await function(*args, **kwargs)

        return asyncio.run(main())

    return wrapper


def fail(message: str, code: int = EXIT_ERROR) -> int:
    """Print one readable line to stderr and return the exit code. Control, line-breaking
    and direction-changing characters in it (a server's problem detail may hold any) are
    shown escaped, never sent to the terminal."""
    from blobledger.cli._output import one_line

    print(f"blobledger: error: {one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (never raises for a user's mistake)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        result: Any = cli.main(arguments, prog_name="blobledger", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else "", file=sys.stderr)
        return EXIT_USAGE
    except click.UsageError as exc:
        hint = f" (see {exc.ctx.command_path if exc.ctx else 'blobledger'} --help)"
        return fail(f"{exc.format_message()}{hint}", EXIT_USAGE)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.Abort:
        return fail("interrupted", EXIT_INTERRUPTED)
    except ConfigError as exc:  # one line per mistake
        for line in str(exc).splitlines()[:-1]:
            fail(line)
        return fail((str(exc).splitlines() or ["configuration error"])[-1], exit_status(exc))
    except BlobLedgerError as exc:
        code = exit_status(exc)
        return fail(_one_line(str(exc)) if code == EXIT_UNAVAILABLE else str(exc), code)
    except KeyboardInterrupt:
        return fail("interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:
        return EXIT_OK
    return int(result or 0)


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "failed"


def run() -> None:
    sys.exit(main())
