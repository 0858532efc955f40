"""``manage.py blobledger_sweep``: ``blobledger sweep`` with Django's settings."""

from blobledger.django.management.cli import CliCommand


class Command(CliCommand):
    help = "Resolve stale staged files and delete detached ones after the grace (blobledger sweep)."
    subcommand = "sweep"
