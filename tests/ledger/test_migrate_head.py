"""A database already at the newest revision is opened without Alembic: the newest revision
read from the migrations' files is Alembic's own head, a command that opens such a ledger
loads no Alembic (nor structlog, when it writes text logs), and anything short of exactly
the head in the version table still goes through Alembic."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text

from blobledger.db import Database
from blobledger.protocol.migrate import (
    alembic_config,
    at_head,
    head_revision,
    migrate_database,
    upgrade,
)
from tests.support.services import create_database, drop_database


def test_the_head_read_from_the_files_is_alembics() -> None:
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert heads == [head_revision()]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_only_exactly_the_head_skips_alembic(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}" if kind == "sqlite" else await create_database()
    db = Database(url)
    try:
        assert not await at_head(db)  # no version table yet
        async with db.engine.begin() as conn:
            await conn.run_sync(upgrade, "0010")
        assert not await at_head(db)  # a revision behind
        await migrate_database(db)
        assert await at_head(db)
        async with db.engine.begin() as conn:  # two rows: Alembic's to judge, not ours
            await conn.execute(text("INSERT INTO alembic_version VALUES ('0010')"))
        assert not await at_head(db)
    finally:
        await db.dispose()
        if kind == "postgresql":
            await drop_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_command_on_a_database_at_the_head_loads_no_alembic(kind: str, tmp_path: Path) -> None:
    url = (f"sqlite:///{tmp_path / 'l.db'}" if kind == "sqlite"
           else asyncio.run(create_database()))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
        env.update(BLOBLEDGER_DATABASE_URL=url, BLOBLEDGER_STORE_URL=f"file://{tmp_path}/s")
        # a command in a fresh interpreter that reports, at its exit, what it had loaded
        probe = ("import atexit, json, sys\n"
                 "atexit.register(lambda: print(json.dumps(sorted({m.split('.')[0] for m in "
                 "sys.modules if m.split('.')[0] in ('alembic', 'structlog')}))))\n"
                 "sys.argv = ['blobledger', *sys.argv[1:]]\n"
                 "from blobledger.cli import run\n"
                 "run()\n")
        # the first migrates; once at the head, neither a second migrate nor a worker need
        for command, expected in (("migrate", ["alembic"]), ("migrate", []), ("sweep", [])):
            done = subprocess.run([sys.executable, "-c", probe, command], env=env, cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout.splitlines()[-1]) == expected, (command, done.stdout)
    finally:
        if kind == "postgresql":
            asyncio.run(drop_database(url))
