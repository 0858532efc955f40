"""``blobledger check`` reports attachments: how many are attached, and an attached blob whose
owner row no longer holds it (an owner deleted behind the session's back, by raw SQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import Session

from blobledger.blocking import BlockingLedger
from blobledger.config import Settings
from tests.attachments.conftest import Invoice, app_engine


def test_cli_check_reports_attachments(tmp_path: Path) -> None:
    url, store = f"sqlite:///{tmp_path / 'app.db'}", f"file://{tmp_path / 'blobs'}"
    env = {**os.environ, "BLOBLEDGER_DATABASE_URL": url, "BLOBLEDGER_STORE_URL": store}

    def check() -> tuple[int, dict[str, object]]:
        done = subprocess.run(
            [sys.executable, "-c", "from blobledger.cli import run; run()", "check", "--json"],
            env=env, capture_output=True, text=True, timeout=60, check=False)
        return done.returncode, json.loads(done.stdout)

    settings = Settings(database_url=url, store_url=store)
    with BlockingLedger.from_urls(url, store, settings=settings) as ledger:
        engine = app_engine(url)
        staged = ledger.stage(b"%PDF checked", filename="c.pdf")
        with Session(engine) as session, session.begin():
            session.add(Invoice(id=1, number="INV-1", pdf=staged))
        code, report = check()
        assert code == 0 and report["attached"] == 1 and report["ok"], report
        with engine.begin() as conn:  # behind the integration's back: no detach happens
            conn.execute(text("DELETE FROM test_invoices"))
        engine.dispose()
    code, report = check()
    assert code == 1, report
    violations = report["violations"]
    assert isinstance(violations, list) and len(violations) == 1
    assert violations[0]["invariant"] == "I1"
    assert violations[0]["subject"] == f"attachment {staged.name}"
    assert "does not hold it" in violations[0]["detail"]
