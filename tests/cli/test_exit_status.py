"""One exit status per kind of error (``blobledger.cli.EXIT_STATUS``, the README's table):
a mistake in the settings is 2, whatever the command finds it with (a bad value, a store
URL it cannot use, a database role or a storage key that the real server refuses); an
outage of the database, the store or the service is 3. Real commands in subprocesses, on
real PostgreSQL and Azurite (or loopback ports where nothing listens)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from blobledger.cli import EXIT_STATUS, EXIT_UNAVAILABLE, EXIT_USAGE
from blobledger.errors import AccessRefused, ConfigError
from tests.support.server import blobledger_command
from tests.support.services import KEY, Azurite, connection_string, free_port, postgres_admin_url

WRONG_KEY = KEY[:10] + ("A" if KEY[10] != "A" else "B") + KEY[11:]


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    return subprocess.run(blobledger_command(*args), env={**clean, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def no_role_url() -> str:
    scheme, rest = postgres_admin_url().split("://", 1)
    return f"{scheme}://no_such_role_here@{rest.split('@', 1)[-1]}"


def azure(azurite: Azurite, key: str = KEY) -> dict[str, str]:
    return {"BLOBLEDGER_STORE_URL": "azure://exitstatus",
            "BLOBLEDGER_AZURE_CONNECTION_STRING":
                azurite.connection_string.replace(KEY, key)}


Environment = Callable[[Azurite], dict[str, str]]
CASES: dict[str, tuple[list[str], Environment, int]] = {
    "a bad setting": (["check"], lambda a: {"BLOBLEDGER_SWEEP_AFTER": "1m"}, EXIT_USAGE),
    "a bad store URL": (["sweep", "--once"], lambda a: {"BLOBLEDGER_STORE_URL": "ftp://x"},
                        EXIT_USAGE),
    "a database role that does not exist": (
        ["migrate"], lambda a: {"BLOBLEDGER_DATABASE_URL": no_role_url()}, EXIT_USAGE),
    "a wrong storage account key": (["sweep", "--once"], lambda a: azure(a, WRONG_KEY),
                                    EXIT_USAGE),
    "a database that does not answer": (
        ["migrate"], lambda a: {"BLOBLEDGER_DATABASE_URL":
                                f"postgresql://postgres@127.0.0.1:{free_port()}/x"},
        EXIT_UNAVAILABLE),
    "a store that does not answer": (
        ["sweep", "--once"], lambda a: {
            "BLOBLEDGER_STORE_URL": "azure://exitstatus", "BLOBLEDGER_AZURE_RETRIES": "0",
            "BLOBLEDGER_AZURE_CONNECTION_STRING": connection_string(free_port())},
        EXIT_UNAVAILABLE),
    "a service that does not answer": (
        ["ls"], lambda a: {"BLOBLEDGER_URL": f"http://127.0.0.1:{free_port()}"},
        EXIT_UNAVAILABLE),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_each_kind_of_error_has_its_exit_status(kind: str, azurite: Azurite,
                                                tmp_path: Path) -> None:
    args, environment, status = CASES[kind]
    env = {"BLOBLEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
           **environment(azurite)}
    if args[0] != "migrate" and "BLOBLEDGER_URL" not in env:  # a database to start from
        assert run(["migrate"], tmp_path, {**env, "BLOBLEDGER_STORE_URL": "file://./blobs",
                                           "BLOBLEDGER_SWEEP_AFTER": "2h"}).returncode == 0
    done = run(args, tmp_path, env)
    assert done.returncode == status, done.stderr
    lines = done.stderr.splitlines()
    assert lines and lines[-1].startswith("blobledger: error: "), done.stderr
    assert "Traceback" not in done.stderr


def test_credentials_refused_are_a_configuration_mistake() -> None:
    assert issubclass(AccessRefused, ConfigError)
    assert next(code for kind, code in EXIT_STATUS if issubclass(AccessRefused, kind)) \
        == EXIT_USAGE
