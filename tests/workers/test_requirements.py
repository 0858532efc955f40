"""A setting whose feature needs what is not installed is refused where the settings are
checked, by every command, before anything runs: one line, exit 2, nothing created. The
missing extra is simulated honestly: the subprocess cannot import the module (see
tests/workers/hidden.py); the shared virtualenv keeps it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.server import blobledger_command
from tests.support.services import free_port
from tests.workers.hidden import hiding

PURE = "BLOBLEDGER_PROCESSORS=content-type needs puremagic: pip install 'blobledger[processors]'"
PILLOW = "BLOBLEDGER_VARIANTS needs Pillow: pip install 'blobledger[images]'"
OTEL = "BLOBLEDGER_OTEL needs OpenTelemetry: pip install 'blobledger[otel]'"
#: (hidden module, the setting that needs it, the line)
MISSING = {
    "processors": ("puremagic", {"BLOBLEDGER_PROCESSORS": "content-type"}, PURE),
    "images": ("PIL", {"BLOBLEDGER_VARIANTS": "thumb=64x64"}, PILLOW),
    "otel": ("opentelemetry", {"BLOBLEDGER_OTEL": "true"}, OTEL),
}
COMMANDS = (("config",), ("serve", "--port", "0"), ("sweep", "--once"), ("check",),
            ("doctor",))


def run(tmp_path: Path, hidden: str, settings: dict[str, str], *args: str
        ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in hiding(tmp_path / "hide", hidden).items()
           if not k.startswith("BLOBLEDGER_")}
    env.update(settings)
    return subprocess.run(blobledger_command(*args), env=env, cwd=tmp_path, text=True,
                          capture_output=True, timeout=60)


@pytest.mark.parametrize("extra", list(MISSING))
def test_every_settings_check_refuses_a_missing_extra(extra: str, tmp_path: Path) -> None:
    hidden, settings, line = MISSING[extra]
    for args in COMMANDS if extra == "processors" else COMMANDS[:1]:
        done = run(tmp_path, hidden, settings, *args)
        assert (done.returncode, done.stderr.splitlines()) == (
            2, [f"blobledger: error: {line}"]), (args, done.stderr)
        assert not (tmp_path / "var").exists()  # refused before anything was created


def test_a_missing_scanner_program_is_refused_by_serve(tmp_path: Path) -> None:
    done = run(tmp_path, "nothing-hidden", {"BLOBLEDGER_PROCESSORS": "scan",
                                             "BLOBLEDGER_SCAN_COMMAND": "no-such-scanner {path}"},
               "serve", "--port", str(free_port()))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "blobledger: error: BLOBLEDGER_SCAN_COMMAND: 'no-such-scanner' is not an executable "
        "program on this machine (install the scanner, or name it by its full path)"]


def test_with_the_extra_installed_the_same_settings_pass(tmp_path: Path) -> None:
    done = run(tmp_path, "nothing-hidden", MISSING["processors"][1], "config")
    assert done.returncode == 0, done.stderr
    assert "BLOBLEDGER_PROCESSORS=content-type" in done.stdout
