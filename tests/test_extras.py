"""The core install (``pip install blobledger``, or ``blobledger[django]``) runs the library,
the blocking facade, Django's storage and the CLI's workers on SQLite and local disk without
the cloud SDKs or the service: none of them is imported on those paths, and a backend or
``blobledger serve`` whose extra is missing is refused as one line naming the extra.

The tests here check a fresh interpreter of the dev install (which has every extra: a missing
one is a package made unimportable in that interpreter), and what ``[django]`` installs as
the installed packages' own metadata declares it (the requirements' closure). The long form,
``scripts/check-extras``, installs the wheel with ``[django]`` into a new virtualenv from the
package index, as a user does, and runs the Django example and the README's library sample
there (2.5 to 4.5 minutes: outside the suite's run)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.test_packaging import wheel  # noqa: F401  (the wheel, built once per module)

ROOT = Path(__file__).resolve().parents[1]
#: what no core path may import: the cloud SDKs, the PostgreSQL driver and the service
EXTRAS_ONLY = ("azure", "botocore", "aiobotocore", "aiohttp", "asyncpg", "fastapi",
               "starlette", "uvicorn", "python_multipart", "multipart", "http_sfv",
               "fastapi_offline")
CORE_MODULES = ("blobledger", "blobledger.protocol.ledger", "blobledger.blocking",
                "blobledger.django.storage", "blobledger.django.views",
                "blobledger.stores.local", "blobledger.cli.migrate", "blobledger.cli.sweep",
                "blobledger.cli.check", "blobledger.cli.reconcile", "blobledger.cli.doctor",
                "blobledger.config")


def loaded(modules: tuple[str, ...]) -> list[str]:
    code = ("import json, sys\n"
            "only = json.loads(sys.argv[2])\n"
            "for name in json.loads(sys.argv[1]): __import__(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules for h in only\n"
            "                        if m == h or m.startswith(h + '.'))))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(modules),
                          json.dumps(EXTRAS_ONLY)],
                         capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(out.stdout))


def test_the_core_paths_import_no_sdk_and_no_service() -> None:
    assert loaded(CORE_MODULES) == []
    assert "fastapi" in loaded(("blobledger.api.app",))  # the probe does see them


def cli_without(hidden: tuple[str, ...], args: list[str], env: dict[str, str],
                tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """The command line in a fresh interpreter where ``hidden`` cannot be imported (as if
    their extra were not installed)."""
    code = ("import sys\n"
            "for name in sys.argv[1].split(','): sys.modules[name] = None\n"
            "from blobledger.cli import main\n"
            "sys.exit(main(sys.argv[2:]))")
    environ = {**os.environ, "BLOBLEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}",
               "BLOBLEDGER_STORE_URL": f"file://{tmp_path / 'blobs'}", **env}
    return subprocess.run([sys.executable, "-c", code, ",".join(hidden), *args],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=environ)


@pytest.mark.parametrize(("hidden", "args", "env", "line"), [
    (("azure",), ["check"], {"BLOBLEDGER_STORE_URL": "azure://docs"},
     "azure:// needs the azure extra: pip install 'blobledger[azure]'"),
    (("aiobotocore", "botocore"), ["migrate"], {"BLOBLEDGER_STORE_URL": "s3://bucket"},
     "s3:// needs the s3 extra: pip install 'blobledger[s3]'"),
    (("asyncpg",), ["sweep"], {"BLOBLEDGER_DATABASE_URL": "postgresql://u@127.0.0.1/db"},
     "a postgresql:// database needs the postgresql extra: "
     "pip install 'blobledger[postgresql]'"),
    (("fastapi", "uvicorn"), ["serve", "--port", "0"], {},
     "blobledger serve needs the serve extra: pip install 'blobledger[serve]'"),
    (("azure",), ["experiments"], {},
     "blobledger experiments needs the azure extra: pip install 'blobledger[azure]'"),
], ids=["azure", "s3", "postgresql", "serve", "experiments"])
def test_a_missing_extra_is_one_line_naming_it(
        hidden: tuple[str, ...], args: list[str], env: dict[str, str], line: str,
        tmp_path: Path) -> None:
    done = cli_without(hidden, args, env, tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip() == f"blobledger: error: {line}", done.stderr
    assert not (tmp_path / "db").exists()  # refused before anything was opened


def test_a_ledger_opened_on_urls_is_refused_alike(tmp_path: Path) -> None:
    """Without the settings (``Ledger.from_urls``), opening the store or the database
    gives the same line."""
    code = ("import asyncio, sys\n"
            "sys.modules['azure'] = None; sys.modules['asyncpg'] = None\n"
            "from blobledger import ConfigError, Ledger\n"
            "async def main(db, store):\n"
            "    try:\n"
            "        async with Ledger.from_urls(db, store): pass\n"
            "    except ConfigError as exc: print(exc)\n"
            f"asyncio.run(main('sqlite:///{tmp_path / 'db'}', 'azure://docs'))\n"
            "asyncio.run(main('postgresql://u@127.0.0.1/db', 'file://./blobs'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, check=True)
    assert out.stdout.splitlines() == [
        "azure:// needs the azure extra: pip install 'blobledger[azure]'",
        "a postgresql:// database needs the postgresql extra: "
        "pip install 'blobledger[postgresql]'"]


README_SAMPLE = ROOT / "README.md"
DJANGO_FLOW = """
from django.core.files.base import ContentFile
from examples.django_invoices.invoices.models import Invoice
invoice = Invoice(number="INV-1")
invoice.pdf.save("inv-1.pdf", ContentFile(b"%PDF-1.7 first"), save=True)
again = Invoice.objects.get(number="INV-1")
with again.pdf.open("rb") as f:
    assert f.read() == b"%PDF-1.7 first", "read back"
print("django ok", again.pdf.name)
"""


def readme_library_sample() -> str:
    text = README_SAMPLE.read_text()
    start = text.index("```python\n", text.index("## The library")) + len("```python\n")
    return text[start:text.index("```", start)]


#: what ``pip install 'blobledger[django]'`` must not bring: the cloud SDKs, the PostgreSQL
#: driver, the service and its metrics
NOT_IN_DJANGO_INSTALL = {"azure-storage-blob", "azure-identity", "azure-core", "botocore",
                         "aiobotocore", "fastapi", "starlette", "uvicorn", "asyncpg",
                         "prometheus-client", "aiohttp"}
#: the long form's switch (scripts/check-extras sets it)
LONG_FORM = pytest.mark.skipif(
    os.environ.get("BLOBLEDGER_LONG_FORMS") != "1",
    reason="the long form (a real install from the package index): scripts/check-extras")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(requirements: list[str]) -> set[str]:
    """Every distribution that installing ``requirements`` brings, as the installed
    distributions' own metadata declares their requirements (markers evaluated here, with
    the extras asked for): what a resolver must install, whatever versions it picks."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [Requirement(r) for r in requirements]
    while pending:
        req = pending.pop()
        key = (canonical(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        found.add(key[0])
        for line in metadata.distribution(req.name).requires or []:
            dep = Requirement(line)
            if dep.marker is None or any(dep.marker.evaluate({"extra": extra})
                                         for extra in ("", *req.extras)):
                pending.append(dep)
    return found


def django_install() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return closure([*project["dependencies"], *project["optional-dependencies"]["django"]])


def test_the_django_install_brings_no_cloud_sdk_nor_service() -> None:
    """The short form of the long one below: what ``[django]`` installs, from the
    requirements the core and the extra declare and those of every package they bring."""
    installed = django_install()
    assert {"django", "sqlalchemy", "alembic", "aiosqlite", "greenlet"} <= installed
    assert not installed & NOT_IN_DJANGO_INSTALL, installed & NOT_IN_DJANGO_INSTALL
    # the probe sees a package that brings one
    assert "starlette" in closure(["fastapi"]) and "azure-core" in closure(["azure-identity"])


#: a script run in a fresh interpreter where the extras' packages cannot be imported
WITHOUT_EXTRAS = ("import runpy, sys\n"
                  "for name in sys.argv[1].split(','): sys.modules[name] = None\n"
                  "sys.argv = sys.argv[2:]\n"
                  "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def run_without_extras(script: Path, args: list[str], cwd: Path,
                       env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, ",".join(EXTRAS_ONLY),
                           str(script), *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**environ, **env})


def test_the_django_example_and_the_library_sample_run_without_the_extras(
        tmp_path: Path) -> None:
    """The short form's run: the Django example migrates, saves a file and reads it back on
    SQLite and disk, and the README's library sample runs, none of the extras' packages
    importable (an import of one fails the run)."""
    var = tmp_path / "var"
    manage = ROOT / "examples" / "django_invoices" / "manage.py"
    for args in (["migrate", "--noinput", "-v", "0"], ["shell", "-c", DJANGO_FLOW]):
        done = run_without_extras(manage, args, tmp_path, {"EXAMPLE_VAR": str(var)})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "django ok documents/invoices/" in done.stdout
    assert any((var / "blobs").rglob("*")), "the bytes are on disk"

    sample = tmp_path / "sample"
    sample.mkdir()
    (sample / "sample.py").write_text(readme_library_sample())
    done = run_without_extras(sample / "sample.py", [], sample, {})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (sample / "app.db").is_file()


@pytest.mark.slow
@LONG_FORM
def test_the_django_install_has_no_cloud_sdk_nor_service(
        wheel: Path, tmp_path: Path) -> None:  # noqa: F811
    """``pip install 'blobledger[django]'`` in a new virtualenv (the real resolution, from
    the package index): no cloud SDK, no service; the Django example saves and reads a file
    on SQLite and disk, the README's library sample runs, and an azure:// store is refused
    as one line."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    environ = {name: value for name, value in os.environ.items()
               if name in ("PATH", "HOME", "LANG", "TMPDIR") or name.startswith("PIP_")}
    install = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              f"blobledger[django] @ {wheel.as_uri()}"],
                             capture_output=True, text=True, timeout=900, env=environ)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    names = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, json; print(json.dumps("
         "sorted(d.metadata['Name'].lower() for d in m.distributions())))"],
        capture_output=True, text=True, check=True, env=environ)
    installed = set(json.loads(names.stdout))
    assert {"blobledger", "django", "sqlalchemy"} <= installed
    assert not installed & NOT_IN_DJANGO_INSTALL, installed

    # the Django example: migrate, save a file, read it back (SQLite and local disk)
    example = tmp_path / "project"
    shutil.copytree(ROOT / "examples", example / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    var = tmp_path / "var"
    django_env = {**environ, "EXAMPLE_VAR": str(var)}
    manage = [str(python), str(example / "examples" / "django_invoices" / "manage.py")]
    for args in (["migrate", "--noinput", "-v", "0"], ["shell", "-c", DJANGO_FLOW]):
        done = subprocess.run([*manage, *args], capture_output=True, text=True, timeout=120,
                              env=django_env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "django ok documents/invoices/" in done.stdout
    assert any((var / "blobs").rglob("*")), "the bytes are on disk"

    # the README's library sample, as written (SQLite + file://)
    sample = tmp_path / "sample"
    sample.mkdir()
    done = subprocess.run([str(python), "-c", readme_library_sample()], capture_output=True,
                          text=True, timeout=120, env=environ, cwd=sample)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (sample / "app.db").is_file()

    # an azure:// store: one line naming the extra, no traceback
    done = subprocess.run([str(env_dir / "bin" / "blobledger"), "check"],
                          capture_output=True, text=True, timeout=120, cwd=sample,
                          env={**environ, "BLOBLEDGER_STORE_URL": "azure://docs"})
    assert done.returncode != 0
    assert done.stderr.strip() == ("blobledger: error: azure:// needs the azure extra: "
                                   "pip install 'blobledger[azure]'"), done.stderr
