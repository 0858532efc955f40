"""``manage.py blobledger_reconcile``: ``blobledger reconcile`` with Django's settings."""

from blobledger.django.management.cli import CliCommand


class Command(CliCommand):
    help = "Compare the store's listing with the ledger's rows (blobledger reconcile)."
    subcommand = "reconcile"
