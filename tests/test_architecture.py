"""The layers and their import rule (docs/architecture.md), checked on every run.

The contracts are import-linter's, in ``[tool.importlinter]`` of pyproject.toml: the layers
(imports only go down), the rooms of the transitions and of the ledger (each writer's on the
shared ones, none on another writer's), of the Azure and S3 stores and of the sweeper, the
backends' settings models (they import nothing of ours) and no cycle between sibling
packages or modules at any depth. This runs them on the source tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = ("imports only go down the layers", "the backends' settings models import nothing",
             "no import cycles between the packages at any depth", "the transitions' rooms",
             "the ledger's rooms", "the Azure store's rooms", "the S3 store's rooms",
             "the sweeper's rooms")


def lint_imports(config: Path, src: Path = ROOT / "src") -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``src`` (found there first, before the installed
    one)."""
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
         " sys.exit(lint_imports_command())", "--config", str(config), "--no-cache"],
        cwd=src, capture_output=True, text=True, timeout=300, check=False,
        env={"PYTHONPATH": str(src), "PATH": ""})


def test_the_import_contracts_hold() -> None:
    done = lint_imports(ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in CONTRACTS:
        assert name in done.stdout, done.stdout
    assert "0 broken" in done.stdout, done.stdout


def test_the_contracts_catch_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """The same contracts on a copy of the tree where a store imports the protocol (upward)
    and the protocol's owners import a worker (a cycle): both contracts break."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "blobledger", copy / "blobledger",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    base = copy / "blobledger" / "stores" / "base.py"
    base.write_text(base.read_text() + "\nfrom blobledger.protocol import models  # noqa\n")
    owners = copy / "blobledger" / "protocol" / "owners.py"
    owners.write_text(owners.read_text() + "\nfrom blobledger.workers import scan  # noqa\n")
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    done = lint_imports(config, copy)
    assert done.returncode != 0, done.stdout
    assert "imports only go down the layers BROKEN" in done.stdout, done.stdout
    assert "blobledger.stores.base -> blobledger.protocol.models" in done.stdout, done.stdout
    assert "no import cycles between the packages at any depth BROKEN" in done.stdout
