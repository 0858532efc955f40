"""``blobledger migrate``: apply the database migrations."""

from __future__ import annotations

import argparse

from blobledger.config import from_env
from blobledger.db import Database


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("migrate", help="apply database migrations",
                                   description="Apply every database migration "
                                   "(BLOBLEDGER_DATABASE_URL).")
    parser.add_argument("--database-url", help="overrides BLOBLEDGER_DATABASE_URL")
    parser.set_defaults(handler=run)


async def run(args: argparse.Namespace) -> int:
    settings = from_env()
    db = Database(args.database_url or settings.database_url)
    if settings.version_table:  # embedded in an application's database
        db.version_table = settings.version_table
    try:
        await db.migrate()
    finally:
        await db.dispose()
    print("migrations applied")
    return 0
