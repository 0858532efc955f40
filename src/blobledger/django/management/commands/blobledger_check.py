"""``manage.py blobledger_check``: ``blobledger check`` with Django's settings."""

from blobledger.django.management.cli import CliCommand


class Command(CliCommand):
    help = "Check the ledger's invariants on Django's database and store (blobledger check)."
    subcommand = "check"
