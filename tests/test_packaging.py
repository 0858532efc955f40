"""The wheel: its licence file, its project URLs and its extras, as built from the sources.

The wheel is built as a release is, by ``python -m build`` (without build isolation, so
offline, with the backend the dev extra installs), from a copy of the files a source
distribution holds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                           "--outdir", str(out), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [built] = out.glob("blobledger-*.whl")
    return built


def metadata(wheel: Path) -> tuple[list[str], Message]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        return names, Parser().parsestr(archive.read(meta).decode())


def test_the_wheel_carries_the_mit_licence(wheel: Path) -> None:
    names, meta = metadata(wheel)
    [licence] = [n for n in names if n.split("/")[-1] == "LICENSE"
                 and n.split("/")[0].endswith(".dist-info")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(licence).decode()
    assert text.startswith("MIT License") and "blobledger contributors" in text
    assert meta["License"] == "MIT"


def test_the_wheel_names_the_project_urls(wheel: Path) -> None:
    _, meta = metadata(wheel)
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert set(urls) == {"Homepage", "Documentation", "Changelog", "Issues"}
    assert all(u.startswith("https://github.com/blobledger/blobledger") for u in urls.values())


def test_the_testing_extra_brings_pytest(wheel: Path) -> None:
    _, meta = metadata(wheel)
    assert "testing" in (meta.get_all("Provides-Extra") or [])
    requires = meta.get_all("Requires-Dist") or []
    for package in ("pytest", "pytest-asyncio"):
        assert any(r.startswith(f"{package}>=") and 'extra == "testing"' in r
                   for r in requires), requires
    assert any(r.startswith("tuspy") and 'extra == "tus"' in r for r in requires), requires
    assert any(r.startswith("pillow") and 'extra == "images"' in r for r in requires), requires


def test_the_conformance_suite_needs_only_what_the_testing_extra_brings() -> None:
    """``blobledger.testing`` imports pytest and nothing else outside the core dependencies."""
    source = (ROOT / "src/blobledger/testing/conformance.py").read_text()
    imported = {line.split()[1].split(".")[0] for line in source.splitlines()
                if line.startswith(("import ", "from "))}
    assert imported - {"__future__", "blobledger"} - set(sys.stdlib_module_names) == {"pytest"}


def test_the_core_needs_no_cloud_sdk_nor_the_service(wheel: Path) -> None:
    """The cloud SDKs, the PostgreSQL driver and the service come with their extras only;
    ``all`` brings every extra's packages, and ``dev`` all of ``all``'s."""
    _, meta = metadata(wheel)
    requires = meta.get_all("Requires-Dist") or []
    core = {r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].strip().lower()
            for r in requires if "extra ==" not in r}
    assert not core & {"azure-storage-blob", "azure-identity", "aiohttp", "aiobotocore",
                       "asyncpg", "fastapi", "starlette", "uvicorn", "python-multipart",
                       "prometheus-client", "http-sfv", "fastapi-offline"}, core
    assert {"sqlalchemy", "alembic", "aiosqlite", "pydantic", "click"} <= core
    extras = {"postgresql": "asyncpg", "azure": "azure-storage-blob", "s3": "aiobotocore",
              "serve": "fastapi", "django": "django"}
    for extra, package in extras.items():
        assert any(r.lower().startswith(package) and f'extra == "{extra}"' in r
                   for r in requires), (extra, requires)
    by_extra: dict[str, set[str]] = {}
    for r in requires:
        if "extra ==" in r:
            extra = r.split('extra == "')[1].split('"')[0]
            by_extra.setdefault(extra, set()).add(r.split(";")[0].strip())
    # written out (pip resolves a project's own extras slowly): every other extra is in
    # ``all``, and ``all`` is in ``dev``
    for extra, packages in by_extra.items():
        if extra not in ("all", "dev", "testing", "examples"):
            assert packages <= by_extra["all"], (extra, packages - by_extra["all"])
    assert by_extra["all"] <= by_extra["dev"], by_extra["all"] - by_extra["dev"]
