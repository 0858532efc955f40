"""The command table, help, usage errors, ``config`` and ``completion``, in subprocesses (no
server needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blobledger.cli import COMMANDS, main
from tests.support.server import blobledger_command


def run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command(*args), env={**clean, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def test_help_lists_the_table_with_examples_and_exit_codes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The installed command's help (a subprocess), then each command's (in this process:
    the same entry point, without a Python start per command)."""
    done = run("--help", cwd=tmp_path)
    assert done.returncode == 0
    for name in COMMANDS:
        assert f"  {name} " in done.stdout
    assert "Examples:" in done.stdout and "Exit codes" in done.stdout
    for name in COMMANDS:
        code = main([name, "--help"])
        sub = capsys.readouterr()
        assert code == 0 and "Examples:" in sub.out, (name, sub.err)


def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["nope"], ["sweep", "--batch", "0"], ["ls", "--page-size", "x"],
                 ["put"], ["sweep", "--once", "--interval", "5m"]):
        done = run(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), (args, lines)


def test_config_masks_secrets_and_reads_dotenv_and_toml(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("BLOBLEDGER_BLOB_PREFIX=from-dotenv\n"
                                   "BLOBLEDGER_API_TOKENS=s3cret:write\n")
    (tmp_path / "b.toml").write_text('upload_deadline = "10m"\nsweep_after = "20m"\n'
                                     '[azure]\nconnection_string = "AccountKey=k3y"\n')
    done = run("--config", "b.toml", "config", cwd=tmp_path,
               BLOBLEDGER_DATABASE_URL="postgresql://app:pw@db/x")
    assert done.returncode == 0, done.stderr
    assert "BLOBLEDGER_BLOB_PREFIX=from-dotenv" in done.stdout.splitlines()
    assert "BLOBLEDGER_UPLOAD_DEADLINE=600" in done.stdout.splitlines()
    assert "BLOBLEDGER_API_TOKENS=****:read+write" in done.stdout.splitlines()
    assert not any(s in done.stdout for s in ("s3cret", ":pw@", "k3y"))
    as_json = json.loads(run("--config", "b.toml", "config", "--json", cwd=tmp_path).stdout)
    assert as_json["azure"]["connection_string"] == "AccountKey=****"


def test_config_mistakes_one_line_each(tmp_path: Path) -> None:
    done = run("config", cwd=tmp_path, BLOBLEDGER_UPLOAD_DEADLINE="soon",
               BLOBLEDGER_MAX_CONNECTIONS="0")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("blobledger: error: BLOBLEDGER_")
                                   for line in lines), lines
    assert done.stdout == ""


def test_a_toml_mistake_names_the_file_and_the_key(tmp_path: Path) -> None:
    (tmp_path / "blobledger.toml").write_text('bogus_key = 1\nupload_deadline = "soon"\n')
    for command in (["config"], ["sweep", "--once"]):
        done = run("--config", "blobledger.toml", *command, cwd=tmp_path,
                   BLOBLEDGER_MAX_UPLOADS="0")
        assert done.returncode == 2, (command, done.stderr)
        assert sorted(done.stderr.splitlines()) == [
            "blobledger: error: BLOBLEDGER_MAX_UPLOADS must be positive",
            "blobledger: error: blobledger.toml: bogus_key is not a setting",
            "blobledger: error: blobledger.toml: upload_deadline: 'soon' is not a duration "
            "(use e.g. 90, 90s, 15m, 2h)"], command
        assert done.stdout == ""


def test_completion_scripts(tmp_path: Path) -> None:
    for shell in ("bash", "zsh", "fish"):
        done = run("completion", shell, cwd=tmp_path)
        assert done.returncode == 0 and "_BLOBLEDGER_COMPLETE" in done.stdout
    completed = subprocess.run(
        blobledger_command(), capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "_BLOBLEDGER_COMPLETE": "bash_complete",
             "COMP_WORDS": "blobledger recon", "COMP_CWORD": "1"})
    assert "reconcile" in completed.stdout


def test_a_command_loads_only_its_own_module(tmp_path: Path) -> None:
    code = ("import sys; from blobledger.cli import main; main(['config']); "
            "print(sorted(m for m in sys.modules if m.startswith(('blobledger.cli.', "
            "'blobledger.api', 'fastapi'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False, cwd=tmp_path)
    assert done.stderr.strip() == "['blobledger.cli.config']", done.stderr


def test_reports_escape_hidden_characters() -> None:
    from blobledger.cli._output import display_name, plain

    assert plain("orphan  invoice\u202etxt.exe: no row\nC:\\x") == (
        "orphan  invoice\\u202etxt.exe: no row\nC:\\x")
    assert display_name("a\\b\u200b") == "a\\u005cb\\u200b"
