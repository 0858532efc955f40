"""``scripts/serve`` installs only when the project changed; ``blobledger serve``, once it
listens, says where it is and how to point the CLI at it.

The script runs as written, in a copy of the project whose ``.venv`` holds stand-ins for
``python`` and ``blobledger`` that record how they were called (a real install takes a
minute); the banner comes from a real ``blobledger serve`` process.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from blobledger.cli.serve import banner
from blobledger.config import Settings
from tests.support.server import BLOBLEDGER
from tests.support.services import terminate

ROOT = Path(__file__).resolve().parents[1]

#: records its arguments; "pip install" also installs the blobledger stand-in
FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $*" >> "$(dirname "$0")/../calls.log"
if [ "$1 $2 $3" = "-m pip install" ]; then
  printf '#!/usr/bin/env bash\\necho "blobledger $*" >> "$(dirname "$0")/../calls.log"\\n' \\
    > "$(dirname "$0")/blobledger"
  chmod +x "$(dirname "$0")/blobledger"
fi
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "serve", tmp_path / "scripts" / "serve")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    return tmp_path


def start(project: Path, *args: str) -> tuple[str, list[str]]:
    """Run scripts/serve; what it printed and the calls it made to the two programs."""
    log = project / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    done = subprocess.run(["bash", str(project / "scripts" / "serve"), *args],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout, log.read_text().splitlines()


def test_the_first_start_installs_and_says_so(project: Path) -> None:
    out, calls = start(project, "--port", "8500")
    assert "installing blobledger into .venv" in out
    pip = "python -m pip install --disable-pip-version-check -e .[serve,tus]"
    assert calls == [pip, "blobledger serve --port 8500"]
    assert " -q" not in pip  # pip's own progress is shown
    assert (project / ".venv" / ".blobledger-install").is_file()


def test_a_second_start_does_not_install(project: Path) -> None:
    start(project)
    out, calls = start(project, "--port", "8500")
    assert calls == ["blobledger serve --port 8500"]
    assert "installing" not in out


def test_a_changed_pyproject_or_a_lost_stamp_installs_again(project: Path) -> None:
    start(project)
    with (project / "pyproject.toml").open("a") as toml:
        toml.write("\n# a new dependency\n")
    _, calls = start(project)
    assert calls[0].startswith("python -m pip install")
    _, calls = start(project)
    assert calls == ["blobledger serve"]
    (project / ".venv" / ".blobledger-install").unlink()
    _, calls = start(project)
    assert calls[0].startswith("python -m pip install")


def test_a_source_change_needs_no_install(project: Path) -> None:
    start(project)
    (project / "src" / "blobledger").mkdir(parents=True)
    (project / "src" / "blobledger" / "new.py").write_text("x = 1\n")
    _, calls = start(project)
    assert calls == ["blobledger serve"]


def test_the_extras_scripts_serve_installs_bring_the_service_and_tuspy() -> None:
    """The service needs the `serve` extra; the README's tus line needs tuspy in .venv:
    the `tus` extra is what brings it."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert [r for r in extras["tus"] if r.startswith("tuspy")]
    assert [r for r in extras["serve"] if r.startswith("uvicorn")]
    assert 'EXTRAS=serve,tus\n' in (ROOT / "scripts" / "serve").read_text()


@contextlib.contextmanager
def serve_banner(cwd: Path, program: Path, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """``program serve --port 0`` in ``cwd``, while the block runs: the banner, checked to
    come once the service answers, and the port it names."""
    log = cwd / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([str(program), "serve", "--port", "0"], cwd=cwd, env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "ls\n" not in (text := log.read_text()) or "listening on" not in text:
            assert process.poll() is None and time.monotonic() < deadline, text
            time.sleep(0.05)
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)\n", text)
        assert match, text
        port = int(match[1])
        # printed once listening: the very next request is answered
        assert httpx.get(f"http://127.0.0.1:{port}/healthz",
                         headers={"Host": "localhost"}).status_code == 200
        yield text[text.index("blobledger: listening on"):], port
    finally:
        assert terminate(process, 20) == 0


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).absolute() != Path(bin_dir).absolute())
    return env


def test_serve_prints_where_it_listens_and_how_to_use_the_cli(tmp_path: Path) -> None:
    """Run as scripts/serve runs it, from the folder holding .venv."""
    (tmp_path / ".venv").symlink_to(BLOBLEDGER.parent.parent)
    (tmp_path / "a.txt").write_text("a\n")
    with serve_banner(tmp_path, tmp_path / ".venv" / "bin" / "blobledger",
                      clean_env()) as (banner, port):
        url = f"http://127.0.0.1:{port}"
        assert banner.splitlines() == [
            f"blobledger: listening on {url}",
            f"  web page:  {url}/",
            f"  API docs:  {url}/docs",
            "  the CLI against this service, from another terminal in this folder:",
            f"    export BLOBLEDGER_URL={url}",
            "    .venv/bin/blobledger ls",
            "    (or `. .venv/bin/activate` once, then `blobledger ls`)",
        ]
        # the commands it prints work as printed, in a shell
        script = f"export BLOBLEDGER_URL={url}\n.venv/bin/blobledger put a.txt\n" \
                 ". .venv/bin/activate\nblobledger ls\n"
        done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=clean_env(),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1].split("\t")[-1] == "a.txt", done.stdout


def test_serve_elsewhere_names_its_program_by_path_or_name(tmp_path: Path) -> None:
    with serve_banner(tmp_path, BLOBLEDGER, clean_env()) as (banner, _):
        assert f"    {BLOBLEDGER} ls\n" in banner
        assert f"`. {BLOBLEDGER.parent / 'activate'}` once" in banner
    on_path = {**clean_env(), "PATH": f"{BLOBLEDGER.parent}{os.pathsep}{os.environ['PATH']}"}
    with serve_banner(tmp_path, BLOBLEDGER, on_path) as (banner, _):
        assert banner.splitlines()[-1] == "    blobledger ls"


@pytest.mark.parametrize(("host", "url"), [
    ("0.0.0.0", "http://127.0.0.1:8500"), ("::", "http://[::1]:8500"),
    ("::1", "http://[::1]:8500"), ("localhost", "http://localhost:8500")])
def test_the_banner_names_an_address_a_client_can_use(host: str, url: str) -> None:
    text, fields = banner(host, 8500, Settings())
    assert f"export BLOBLEDGER_URL={url}\n" in text
    assert fields["url"] == url and fields["docs"] == f"{url}/docs"


def test_with_tokens_the_banner_asks_for_one_and_shows_none() -> None:
    text, fields = banner("127.0.0.1", 8500, Settings(api_tokens="s3cret:write"))
    assert "    export BLOBLEDGER_TOKEN=<a token of BLOBLEDGER_API_TOKENS>\n" in text
    assert "s3cret" not in text + str(fields)
