"""The layers and their import rule (docs/architecture.md), checked on every run.

The contracts are import-linter's, in ``[tool.importlinter]`` of pyproject.toml: the layers
(imports only go down), the settings' own rooms (the areas side by side under the composed
settings, the backends' settings lowest), the rooms of the transitions and of the ledger
(each writer's on the shared ones, none on another writer's), of the Azure and S3 stores
and of the sweeper, the backends' settings models (they import nothing of ours) and no
cycle between sibling packages or modules at any depth. This runs them on the source
tree, and checks that every room is in a layer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACTS = ("imports only go down the layers",
             "the settings' rooms: the areas side by side, composed and read above them",
             "the backends' settings models import nothing",
             "no import cycles between the packages at any depth",
             "the transitions' rooms", "the ledger's rooms", "the Azure store's rooms",
             "the S3 store's rooms", "the sweeper's rooms")


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


def lint_with(tmp_path: Path, imports: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The contracts on a copy of the tree where each module (a path under ``blobledger/``)
    gains one import line."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "blobledger", copy / "blobledger",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    for module, line in imports.items():
        path = copy / "blobledger" / module
        path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    config = tmp_path / "pyproject.toml"
    config.write_text((ROOT / "pyproject.toml").read_text())
    done = lint_imports(config, copy)
    assert done.returncode != 0, done.stdout
    return done


def test_the_contracts_catch_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    """The same contracts on a copy of the tree where a store imports the protocol (upward)
    and the protocol's owners import a worker (a cycle): both contracts break."""
    done = lint_with(tmp_path, {
        "stores/base.py": "from blobledger.protocol import models",
        "protocol/owners.py": "from blobledger.workers import scan"})
    assert "imports only go down the layers BROKEN" in done.stdout, done.stdout
    assert "blobledger.stores.base -> blobledger.protocol.models" in done.stdout, done.stdout
    assert "no import cycles between the packages at any depth BROKEN" in done.stdout


def _rooms(package: Path) -> set[str]:
    """The modules and packages directly under ``package`` (a folder without
    ``__init__.py``, such as Alembic's migrations, is no Python room)."""
    return ({path.stem for path in package.glob("*.py") if path.name != "__init__.py"}
            | {path.name for path in package.iterdir() if (path / "__init__.py").is_file()})


@pytest.mark.parametrize("container", ["blobledger", "blobledger.config"])
def test_every_room_is_in_a_layer(container: str) -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(contract["layers"] for contract in contracts["contracts"]
                  if contract.get("containers") == [container])
    named = {room.strip() for layer in layers for room in layer.split("|")}
    assert _rooms(ROOT / "src" / Path(*container.split("."))) == named


def test_the_settings_import_no_store_and_no_area_another(tmp_path: Path) -> None:
    """The upward import of old (the settings reading the stores' modules) and an area
    reading another area (their checks belong to the composed settings) both break."""
    done = lint_with(tmp_path, {
        "config/storage.py": "from blobledger.stores import base",
        "config/service.py": "from blobledger.config import workers"})
    assert "imports only go down the layers BROKEN" in done.stdout, done.stdout
    assert "blobledger.config.storage -> blobledger.stores.base" in done.stdout, done.stdout
    assert ("the settings' rooms: the areas side by side, composed and read above them "
            "BROKEN") in done.stdout, done.stdout
    assert "blobledger.config.service -> blobledger.config.workers" in done.stdout
