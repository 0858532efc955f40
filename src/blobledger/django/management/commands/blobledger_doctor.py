"""``manage.py blobledger_doctor``: ``blobledger doctor`` with Django's settings."""

from blobledger.django.management.cli import CliCommand


class Command(CliCommand):
    help = "Probe the store for what the protocol relies on (blobledger doctor)."
    subcommand = "doctor"
