"""What a newcomer's mistakes get from the CLI: a suggestion for a mistyped command, aliases,
``check`` and ``doctor`` that create nothing where there is nothing, ``config`` refusing
what the other commands refuse, a missing PostgreSQL database told as a configuration
mistake, a service that is not where the CLI looks told at once, and no ``None`` in what
``reconcile`` and ``check`` print. In subprocesses, in an empty folder."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from blobledger import Ledger
from tests.support.server import blobledger_command
from tests.support.services import Azurite, MotoS3, free_port, postgres_admin_url


def run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command(*args), env={**clean, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The one error line of a command that exited with ``code``."""
    assert done.returncode == code, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("blobledger: error: "), lines
    return lines[0]


def test_a_mistyped_command_gets_a_suggestion(tmp_path: Path) -> None:
    assert one_error(run("lst", cwd=tmp_path), 2) == (
        "blobledger: error: No such command 'lst'. Did you mean 'ls'? "
        "(see blobledger --help)")
    assert "Did you mean 'check'?" in one_error(run("chek", cwd=tmp_path), 2)
    assert "Did you mean" not in one_error(run("xyzzy", cwd=tmp_path), 2)


def test_list_and_delete_are_ls_and_rm(tmp_path: Path) -> None:
    for alias, command in (("list", "ls"), ("delete", "rm")):
        done = run(alias, "--help", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        own = run(command, "--help", cwd=tmp_path).stdout
        assert done.stdout.split("\n", 1)[1] == own.split("\n", 1)[1]  # past the usage line
    listed = run("--help", cwd=tmp_path).stdout
    assert "(also: list)" in listed and "(also: delete)" in listed


@pytest.mark.slow
def test_check_and_doctor_create_nothing_in_an_empty_folder(tmp_path: Path) -> None:
    line = one_error(run("check", cwd=tmp_path), 2)
    assert not (tmp_path / "var").exists()
    assert "database sqlite:///./var/blobledger.db does not exist" in line
    assert f"no file {tmp_path}/var/blobledger.db" in line
    assert "BLOBLEDGER_DATABASE_URL" in line and "check creates nothing" in line
    assert "migrate" not in line
    line = one_error(run("doctor", cwd=tmp_path), 2)
    assert not (tmp_path / "var").exists()
    assert f"store file://{tmp_path}/var/blobs does not exist" in line
    assert "BLOBLEDGER_STORE_URL" in line and "doctor creates nothing" in line
    # the database there, the store not: check names the store (migrate of the database
    # alone: with the service's settings it would set the store up too)
    assert run("migrate", "--database-url", "sqlite:///./var/blobledger.db",
               cwd=tmp_path).returncode == 0
    line = one_error(run("check", cwd=tmp_path), 2)
    assert f"store file://{tmp_path}/var/blobs does not exist" in line
    assert not (tmp_path / "var" / "blobs").exists()
    # where the service's store is, both work (and still create nothing else)
    (tmp_path / "var" / "blobs" / "blobs").mkdir(parents=True)
    done = run("check", cwd=tmp_path)
    assert done.returncode == 0 and "no violations" in done.stdout, done.stderr
    assert done.stdout.splitlines()[:2] == ["database: sqlite:///./var/blobledger.db",
                                            f"store: file://{tmp_path}/var/blobs"]
    done = run("doctor", cwd=tmp_path)
    assert done.returncode == 0 and f"store: file://{tmp_path}/var/blobs" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["azure", "s3"])
def test_check_creates_no_container_nor_bucket(kind: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    name = f"absent{uuid.uuid4().hex[:12]}"
    if kind == "azure":
        azurite: Azurite = request.getfixturevalue("azurite")
        env = {"BLOBLEDGER_STORE_URL": f"azure://{name}",
               "BLOBLEDGER_AZURE_CONNECTION_STRING": azurite.connection_string}
    else:
        moto: MotoS3 = request.getfixturevalue("moto")
        env = {"BLOBLEDGER_STORE_URL": f"s3://{name}", **moto.environment()}
    env["BLOBLEDGER_DATABASE_URL"] = f"sqlite:///{tmp_path}/db.sqlite"
    # the database alone (migrate with the service's settings would set the store up too)
    assert run("migrate", "--database-url", env["BLOBLEDGER_DATABASE_URL"], cwd=tmp_path,
               **env).returncode == 0
    for _ in range(2):  # the second run finds it missing still: the first created nothing
        line = one_error(run("check", cwd=tmp_path, **env), 2)
        assert name in line and "does not exist" in line, line
        assert "BLOBLEDGER_STORE_URL" in line and "check creates nothing" in line, line


def test_serve_still_creates_its_database_and_store(tmp_path: Path) -> None:
    """What only ``check`` and ``doctor`` refuse: ``migrate`` makes the SQLite file, and
    a ledger (``serve``'s) the store's folder."""
    assert run("migrate", cwd=tmp_path).returncode == 0
    assert (tmp_path / "var" / "blobledger.db").is_file()

    async def open_ledger() -> None:
        async with Ledger.from_urls(f"sqlite:///{tmp_path}/var/blobledger.db",
                                    f"file://{tmp_path}/var/blobs"):
            pass

    asyncio.run(open_ledger())
    assert (tmp_path / "var" / "blobs" / "blobs").is_dir()


def test_config_refuses_the_urls_check_refuses(tmp_path: Path) -> None:
    bad = {"BLOBLEDGER_STORE_URL": "ftp://x"}
    refused = one_error(run("config", cwd=tmp_path, **bad), 2)
    assert refused == one_error(run("check", cwd=tmp_path, **bad), 2)
    assert "unsupported store URL 'ftp://x'" in refused
    both = run("config", cwd=tmp_path, BLOBLEDGER_STORE_URL="ftp://x",
               BLOBLEDGER_DATABASE_URL="mysql://db/x")
    assert both.returncode == 2 and both.stdout == ""
    assert [line.split(":")[2].strip() for line in both.stderr.splitlines()] == [
        "unsupported database 'mysql'", "unsupported store URL 'ftp"]
    assert not (tmp_path / "var").exists()


def test_a_missing_postgresql_database_is_a_configuration_error(tmp_path: Path) -> None:
    name = f"absent_{uuid.uuid4().hex[:12]}"
    url = make_url(postgres_admin_url()).set(database=name).render_as_string(hide_password=False)
    (tmp_path / "store" / "blobs").mkdir(parents=True)
    env = {"BLOBLEDGER_DATABASE_URL": url, "BLOBLEDGER_STORE_URL": f"file://{tmp_path}/store"}
    for command in (["check"], ["migrate"], ["sweep", "--once"]):
        line = one_error(run(*command, cwd=tmp_path, **env), 2)
        assert f"database '{name}' does not exist" in line, (command, line)
        assert f"createdb {name}" in line and "unreachable" not in line, (command, line)
    # a server that does not answer stays an outage (exit 3)
    down = make_url(url).set(port=free_port()).render_as_string(hide_password=False)
    line = one_error(run("check", cwd=tmp_path, **{**env, "BLOBLEDGER_DATABASE_URL": down}), 3)
    assert "database unreachable" in line


def test_a_service_not_there_is_told_at_once(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    for command in (["ls"], ["show", "x"], ["get", "x"], ["rm", "x"]):
        line = one_error(run(*command, cwd=tmp_path, BLOBLEDGER_URL=dead), 3)
        assert f"cannot connect to {dead}" in line and "BLOBLEDGER_URL" in line, line
    (tmp_path / "f.txt").write_bytes(b"x")
    done = run("put", "f.txt", cwd=tmp_path, BLOBLEDGER_URL=dead)
    assert done.returncode == 3
    *told, error = done.stderr.splitlines()
    # each retry said as it happens, the URL tried in every line; a few, briefly
    assert len(told) == 2 and all(line.startswith(f"blobledger: cannot connect to {dead}")
                                  for line in told), told
    assert "retry 1 of 2" in told[0] and "retry 2 of 2" in told[1]
    assert error.startswith("blobledger: error: upload of f.txt failed after 3 attempts")
    assert "BLOBLEDGER_URL" in error and dead in error
    # the retries wait about a second, not sixteen (the waits each line announces: a wall
    # clock would measure the machine's load as much as the waits)
    waits = [re.search(r"trying again in ([0-9.]+)s", line) for line in told]
    assert all(waits) and sum(float(wait[1]) for wait in waits if wait) < 3, told


async def _bytes(data: bytes) -> AsyncIterator[bytes]:
    yield data


def test_an_untagged_blob_is_said_so_never_none(tmp_path: Path) -> None:
    database, store = f"sqlite:///{tmp_path}/db.sqlite", f"file://{tmp_path}/store"

    async def orphan() -> None:
        async with Ledger.from_urls(database, store) as ledger:
            await ledger.store.put("documents/orphan.txt", _bytes(b"x"), tags={})

    asyncio.run(orphan())
    env = {"BLOBLEDGER_DATABASE_URL": database, "BLOBLEDGER_STORE_URL": store}
    reconciled = run("reconcile", cwd=tmp_path, **env)
    assert reconciled.returncode == 1, reconciled.stderr
    assert "documents/orphan.txt: blob without a row, untagged" in reconciled.stdout
    checked = run("check", "--settled", cwd=tmp_path, **env)
    assert checked.returncode == 1, checked.stderr
    assert "I4 blob documents/orphan.txt: stored (untagged) with no row" in checked.stdout
    for done in (reconciled, checked):
        assert "None" not in done.stdout + done.stderr
