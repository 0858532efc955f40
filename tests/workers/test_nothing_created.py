"""A worker or a query run without the service's settings creates no database: it names
the database it looked for and the setting, exit 2, and leaves no file (no
``./var/blobledger.db``, no SQLite file nor its ``.sweep-lock``) that a later `migrate`
would take for the service's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.server import blobledger_command


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command(*args), env={**clean, **env}, cwd=tmp_path,
                          text=True, capture_output=True, timeout=60)


@pytest.mark.parametrize("args", [("events", "list"), ("sweep", "--once"), ("reconcile",)])
def test_the_default_database_is_not_created(args: tuple[str, ...], tmp_path: Path) -> None:
    done = run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("blobledger: error: database sqlite:///./var/blobledger.db does "
                           "not exist") and "BLOBLEDGER_DATABASE_URL" in line
    assert "migrate" not in line
    assert list(tmp_path.iterdir()) == []


def test_a_named_sqlite_file_and_its_sweep_lock_are_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere.db"
    done = run(tmp_path, "sweep", BLOBLEDGER_DATABASE_URL=f"sqlite:///{missing}",
               BLOBLEDGER_STORE_URL=f"file://{tmp_path}")
    assert done.returncode == 2, done.stderr
    assert f"no file {missing}" in done.stderr
    assert list(tmp_path.iterdir()) == []
