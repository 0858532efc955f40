"""The ledger's tables under a prefix (and, on PostgreSQL, in a schema) chosen by the
application, in a process of its own: nothing named ``blobs`` or ``documents`` is created."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect

from blobledger.db import Database
from tests.support.services import create_database, drop_database


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_prefixed_tables(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}" if kind == "sqlite" else await create_database()
    schema = "ledger" if kind == "postgresql" else None
    env = {**os.environ, "BLOBLEDGER_TABLE_PREFIX": "app_bl_"}
    if schema:
        env["BLOBLEDGER_DB_SCHEMA"] = schema
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tests.attachments.prefixed_app", url,
             f"file://{tmp_path / 'blobs'}"],
            env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        db = Database(url)
        async with db.engine.connect() as conn:
            ours = await conn.run_sync(lambda c: set(inspect(c).get_table_names(schema)))
            default = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        await db.dispose()
        assert {"app_bl_blobs", "app_bl_documents", "app_bl_idempotency_keys"} <= ours
        assert not {"blobs", "documents", "idempotency_keys"} & (ours | default)
        assert "test_invoices" in default
    finally:
        if kind == "postgresql":
            await drop_database(url)
