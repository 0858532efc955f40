"""Management commands that are the ``blobledger`` command's own subcommands, run with the
settings of Django's ``settings.py`` (those of the default storage when it is a
``LedgerStorage``, for the database ``--database``).

Every argument after Django's own goes to the subcommand as given:
``manage.py blobledger_sweep --interval 5m``, ``manage.py blobledger_check --settled``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

import click
from django.core.files.storage import storages
from django.core.management.base import (
    BaseCommand,
    CommandError,
    CommandParser,
    DjangoHelpFormatter,
)
from django.db import DEFAULT_DB_ALIAS

from blobledger.cli import State
from blobledger.config import Settings
from blobledger.django.conf import ledger_settings
from blobledger.django.storage import LedgerStorage


def django_settings(alias: str) -> Settings:
    """blobledger's settings for a Django database, with the default storage's options."""
    storage = storages["default"]
    if isinstance(storage, LedgerStorage):
        return storage.settings_for(alias)
    return ledger_settings(alias)


class _Formatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's help layout, with the subcommand's options (the epilog) kept as formatted."""


class CliCommand(BaseCommand):
    """One ``blobledger`` subcommand (``subcommand``: its module in ``blobledger.cli``)."""

    subcommand = ""

    def command(self) -> click.Command:
        command: click.Command = importlib.import_module(
            f"blobledger.cli.{self.subcommand}").command
        return command

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", _Formatter)
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.epilog = self._subcommand_help(prog_name)
        parse_known = parser.parse_known_args

        def parse_args(args: Any = None, namespace: Any = None) -> argparse.Namespace:
            known: argparse.Namespace
            known, rest = parse_known(args, namespace)
            known.cli_args = rest  # the subcommand's own, in their order
            return known

        parser.parse_args = parse_args  # type: ignore[method-assign, assignment]
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS,
                            help="the Django database whose ledger to work on")

    def _subcommand_help(self, prog_name: str) -> str:
        """The subcommand's own options (``--once``, ``--settled``, ``--fix``...), as its
        ``--help`` gives them: ``--help`` shows them after Django's."""
        command = self.command()
        with click.Context(command, info_name=f"{prog_name} blobledger_{self.subcommand}") \
                as context:
            formatter = context.make_formatter()
            command.format_options(context, formatter)
        lines = formatter.getvalue().splitlines()[1:]  # after click's "Options:"
        return "\n".join([f"options of blobledger {self.subcommand}, passed through as given:",
                          *(line for line in lines if not line.lstrip().startswith("--help"))])

    def handle(self, *args: Any, **options: Any) -> None:
        command = self.command()
        try:
            code = command.main(args=[*args, *options["cli_args"]],
                                prog_name=f"manage.py blobledger_{self.subcommand}",
                                obj=State.of(django_settings(options["database"])),
                                standalone_mode=False)
        except click.ClickException as exc:
            raise CommandError(exc.format_message(), returncode=exc.exit_code) from exc
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        if code:
            raise CommandError(f"blobledger {self.subcommand} exited with status {code}",
                               returncode=int(code))
