"""Every code block of README.md and docs/*.md runs as written (see ``tests.docs.blocks``).

A block runs in a folder that stands for the user's checkout: it holds ``.venv`` (this
virtualenv), whose ``bin`` is also first on the PATH (as after ``. .venv/bin/activate``), and
no ``BLOBLEDGER_*`` variable is set. ``sh`` blocks run in bash with ``-e -o pipefail`` (a
failing line fails the block). ``python`` blocks are saved as ``sample.py`` and run twice
in the same fresh folder (a second run must work too: fresh keys, nothing fixed that the
first run used up); ``pytest`` blocks are saved under their own name and run by pytest. No
block may print a problem document (a refusal by the service).

Blocks of one document that talk to a service share one, started as ``scripts/serve`` (or
``scripts/example``) starts it, on a free port: they run in its folder, one after the other
in the document's order, with the documents' ``http://127.0.0.1:8000`` (``:8001``) read as
its URL and ``BLOBLEDGER_URL`` exported, as the README's first block tells a user to.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from tests.docs.blocks import ROOT, SERVICE_URLS, Block, all_blocks
from tests.support.server import BLOBLEDGER, wait_until_ready
from tests.support.services import Azurite, MotoS3, free_port, terminate

BLOCKS = all_blocks()
VENV = BLOBLEDGER.parent.parent
STANDALONE = [b for b in BLOCKS if b.runs and not b.problems() and b.service is None]
SERVED = sorted({(b.document, b.service) for b in BLOCKS
                 if b.runs and not b.problems() and b.service is not None})
TIMEOUT = 180


def test_every_block_runs_or_says_why_not() -> None:
    problems = [p for block in BLOCKS for p in block.problems()]
    assert not problems, "\n".join(problems)


def test_the_blocks_are_found() -> None:
    """The reader finds the blocks of every document, indented ones too."""
    where = {b.where for b in BLOCKS}
    assert {"README.md", "docs/attachments.md", "docs/backends.md"} <= {
        w.split(":")[0] for w in where}
    assert any(b.text.startswith("head -c") and b.service == "server" for b in BLOCKS)
    assert len([b for b in BLOCKS if b.runs]) >= 12


def checkout(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".venv").symlink_to(VENV)
    return folder


def user_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BLOBLEDGER_", "AWS_", "PYTEST_")) and k != "VIRTUAL_ENV"}
    env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def run(block: Block, folder: Path, env: Mapping[str, str],
        urls: Mapping[str, str] | None = None) -> str:
    """Run one block in ``folder``; its output, or a failure naming the block."""
    text = block.text
    for written, actual in (urls or {}).items():
        text = text.replace(written, actual)
    if block.language == "sh":
        command = ["bash", "-e", "-o", "pipefail", "-c", text]
    elif "pytest" in block.needs:
        assert block.filename
        (folder / block.filename).write_text(text)
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "--asyncio-mode=auto", block.filename]
    else:  # saved as a file and run, as a user would
        (folder / "sample.py").write_text(text)
        command = [sys.executable, "sample.py"]
    done = subprocess.run(command, cwd=folder, env=dict(env), capture_output=True, text=True,
                          timeout=TIMEOUT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{block.where} failed ({done.returncode}):\n{output[-4000:]}"
    assert "urn:blobledger:problem:" not in output, f"{block.where} was refused:\n{output}"
    if "pytest" in block.needs:  # every case ran, none was skipped
        assert re.search(r"\b\d+ passed\b", output) and "skipped" not in output, output
    return output


def emulator_env(block: Block, request: pytest.FixtureRequest) -> dict[str, str]:
    extra: dict[str, str] = {}
    if "azure" in block.needs:
        azurite: Azurite = request.getfixturevalue("azurite")
        extra["BLOBLEDGER_AZURE_CONNECTION_STRING"] = azurite.connection_string
    if "s3" in block.needs:
        moto: MotoS3 = request.getfixturevalue("moto")
        extra.update(moto.environment())
    return extra


@pytest.mark.parametrize("block", STANDALONE, ids=[b.where for b in STANDALONE])
def test_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    folder = checkout(tmp_path / "checkout")
    env = user_env(**emulator_env(block, request))
    run(block, folder, env)
    if block.language == "python" and "pytest" not in block.needs:
        run(block, folder, env)  # again: nothing the first run used up is needed


@contextlib.contextmanager
def service(kind: str, folder: Path) -> Iterator[str]:
    """``blobledger serve`` as scripts/serve runs it, or the example application as
    scripts/example runs it, in ``folder`` on a free port; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    if kind == "server":
        command = [str(BLOBLEDGER), "serve", "--port", str(port)]
        env = user_env()
    else:
        command = [sys.executable, "-m", "uvicorn", "--factory", "examples.invoices.app:main",
                   "--host", "127.0.0.1", "--port", str(port)]
        (folder / "var" / "example").mkdir(parents=True)
        env = user_env(PYTHONPATH=str(ROOT),
                       BLOBLEDGER_DATABASE_URL="sqlite:///./var/example/invoices.db",
                       BLOBLEDGER_STORE_URL="file://./var/example/blobs")
    log = folder / f"{kind}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        if kind == "server":
            wait_until_ready(url, process, log)
        else:
            wait_until_answering(f"{url}/docs", process, log)
        yield url
    finally:
        terminate(process, 20)


def wait_until_answering(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError(f"{url} not answering:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.mark.slow
@pytest.mark.parametrize(("document", "kind"), SERVED,
                         ids=[f"{d}-{k}" for d, k in SERVED])
def test_blocks_against_a_running_service(document: str, kind: str, tmp_path: Path,
                                          request: pytest.FixtureRequest) -> None:
    blocks = [b for b in BLOCKS if b.document == document and b.service == kind
              and b.runs and not b.problems()]
    folder = checkout(tmp_path / "checkout")
    with service(kind, folder) as url:
        for block in blocks:
            env = user_env(**emulator_env(block, request))
            if kind == "server":
                env["BLOBLEDGER_URL"] = url
            run(block, folder, env, {SERVICE_URLS[kind]: url})
