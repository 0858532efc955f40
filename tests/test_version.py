"""The version is written once, in pyproject.toml: every place that reports it reads the
installed distribution's metadata."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner

import blobledger
from blobledger.api.app import create_app
from blobledger.cli import cli
from blobledger.cli._client import Connection, open_client
from blobledger.config import Settings

ROOT = Path(__file__).resolve().parent.parent


def test_every_place_reports_the_metadata_version() -> None:
    expected = version("blobledger")
    assert blobledger.__version__ == expected
    assert create_app(settings=Settings()).openapi()["info"]["version"] == expected
    shown = CliRunner().invoke(cli, ["--version"])
    assert shown.exit_code == 0 and shown.output.split()[-1] == expected
    with open_client(Connection("http://127.0.0.1:9", None)) as client:
        assert client.http.headers["user-agent"] == f"blobledger-cli/{expected}"


def test_the_version_is_written_only_in_pyproject() -> None:
    written = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    literal = re.compile(rf"""["']{re.escape(written)}["']""")
    sources = [path for path in (ROOT / "src").rglob("*.py") if literal.search(path.read_text())]
    assert sources == []
