"""ceph's s3-tests against the S3 endpoint and, beside it, moto's own S3 server.

``python -m tests.s3tests.harness`` (``scripts/s3-tests``) takes ceph's s3-tests at the
pinned commit :data:`PINNED` (a checkout named by ``BLOBLEDGER_S3TESTS_DIR``, or a git
repository, directory or URL, named by ``BLOBLEDGER_S3TESTS_GIT``: the commit is exported
from it into a temporary folder), starts each target (``serve`` on SQLite with the local
disk, on PostgreSQL with Azurite, on PostgreSQL with moto's S3; moto's server alone), runs
the core groups of :mod:`tests.s3tests.plugin` against it (a configuration file written for
it, ``S3TEST_CONF``) and prints each group's passed/failed/total and percentage per target,
and each failure class with its count. ``BLOBLEDGER_S3TESTS_LOG``: a file pytest's own
output is appended to (its progress).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.s3tests.plugin import GROUPS
from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import (
    ROOT,
    create_database,
    drop_database,
    free_port,
    start_azurite,
    start_moto,
    terminate,
)

#: the commit of https://github.com/ceph/s3-tests these figures are for
PINNED = "8f0ae7b404a3a2fcf7038bf1e6bf29544fe9b6a3"
UPSTREAM = "https://github.com/ceph/s3-tests.git"
TARGETS = ("sqlite-local", "postgresql-azure", "postgresql-moto", "moto")
#: the three users s3-tests signs as (main, alt, tenant), each a key of the endpoint and an
#: account of its own (``BLOBLEDGER_S3API_ACCOUNTS``): s3-tests' other users
USERS = {"main": ("S3TESTSMAIN", "main-secret-0123456789abcdefghij"),
         "alt": ("S3TESTSALT", "alt-secret-0123456789abcdefghijk"),
         "tenant": ("S3TESTSTENANT", "tenant-secret-0123456789abcdefgh")}
#: the endpoint's own host (the S3 endpoint at its root, as s3-tests addresses it)
HOST = "localhost"


@contextlib.contextmanager
def checkout() -> Iterator[Path]:
    """s3-tests at :data:`PINNED`: ``BLOBLEDGER_S3TESTS_DIR`` as it is, or the commit
    exported from ``BLOBLEDGER_S3TESTS_GIT`` (default: the upstream URL) into a temporary
    folder."""
    given = os.environ.get("BLOBLEDGER_S3TESTS_DIR")
    if given:
        yield Path(given)
        return
    source = os.environ.get("BLOBLEDGER_S3TESTS_GIT", UPSTREAM)
    with tempfile.TemporaryDirectory(prefix="blobledger-s3tests-") as folder:
        work = Path(folder)
        git_dir = source
        if not Path(source).is_dir():
            subprocess.run(["git", "clone", "--quiet", "--bare", source, str(work / "git")],
                           check=True)
            git_dir = str(work / "git")
        archive = work / "s3-tests.tar"
        subprocess.run(["git", "--git-dir", git_dir, "archive", "--format=tar", "-o",
                        str(archive), PINNED], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(work / "s3-tests", filter="data")
        yield work / "s3-tests"


@dataclass
class Target:
    name: str
    host: str
    port: int


def _config(target: Target, folder: Path) -> Path:
    sections = [f"[DEFAULT]\nhost = {target.host}\nport = {target.port}\nis_secure = False\n"
                "ssl_verify = False\n", "[fixtures]\nbucket prefix = s3t-{random}-\n"]
    for role, section in (("main", "s3 main"), ("alt", "s3 alt"), ("tenant", "s3 tenant"),
                          ("main", "iam"), ("main", "iam root"), ("alt", "iam alt root")):
        key_id, secret = USERS[role]
        sections.append(f"[{section}]\ndisplay_name = {key_id}\nuser_id = {key_id}\n"
                        f"email = {role}@example.com\naccess_key = {key_id}\n"
                        f"secret_key = {secret}\napi_name =\ntenant = testx\n")
    path = folder / "s3tests.conf"
    path.write_text("\n".join(sections))
    return path


@contextlib.contextmanager
def _serve(env: dict[str, str], folder: Path) -> Iterator[int]:
    port = free_port()
    # every user of s3-tests creates and deletes buckets of its own: write and admin
    keys = ",".join(f"{key_id}:{secret}:write+admin" for key_id, secret in USERS.values())
    full = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
    accounts = ",".join(key_id for key_id, _ in USERS.values())
    full.update(BLOBLEDGER_S3API_KEYS=keys, BLOBLEDGER_S3API_ACCOUNTS=accounts,
                BLOBLEDGER_S3API_HOST=HOST, **env)
    log = folder / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(blobledger_command("serve", "--port", str(port)),
                                   env=full, cwd=folder, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_ready(f"http://127.0.0.1:{port}", process, log)
        yield port
    finally:
        terminate(process, 15)


@contextlib.contextmanager
def started(name: str, folder: Path) -> Iterator[Target]:
    """The target ``name`` running until the block ends (every process stopped after)."""
    with contextlib.ExitStack() as stack:
        if name == "sqlite-local":
            port = stack.enter_context(_serve({
                "BLOBLEDGER_DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'ledger.db'}",
                "BLOBLEDGER_STORE_URL": f"file://{folder / 'store'}"}, folder))
            yield Target(name, HOST, port)
            return
        if name == "moto":
            moto = start_moto()
            stack.callback(moto.stop)
            yield Target(name, "127.0.0.1", moto.port)
            return
        url = asyncio.run(create_database())
        stack.callback(lambda: asyncio.run(drop_database(url)))
        env = {"BLOBLEDGER_DATABASE_URL": url}
        if name == "postgresql-azure":
            azurite = start_azurite()
            stack.callback(azurite.stop)
            env.update(BLOBLEDGER_STORE_URL="azure://s3tests",
                       BLOBLEDGER_AZURE_CONNECTION_STRING=azurite.connection_string)
        elif name == "postgresql-moto":
            moto = start_moto()
            stack.callback(moto.stop)
            env.update(BLOBLEDGER_STORE_URL="s3://s3tests/ledger", **moto.environment())
        else:
            raise ValueError(f"unknown target {name!r} (one of {', '.join(TARGETS)})")
        yield Target(name, HOST, stack.enter_context(_serve(env, folder)))


def run(target: Target, tests: Path, folder: Path, only: list[str] | None = None,
        timeout: int = 120) -> list[dict[str, Any]]:
    """s3-tests' core groups (or the cases ``only``) against ``target``: each case's
    name, group, outcome and failure reason."""
    report = folder / f"{target.name}.json"
    env = {**os.environ, "S3TEST_CONF": str(_config(target, folder)),
           "BLOBLEDGER_S3TESTS_REPORT": str(report),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(tests)])}
    env.pop("BLOBLEDGER_S3TESTS_ONLY", None)
    if only:
        env["BLOBLEDGER_S3TESTS_ONLY"] = ",".join(only)
    plugins = ["-p", "tests.s3tests.plugin", "-p", "no:cacheprovider", "-p", "no:asyncio",
               "-p", "no:django"]
    log = os.environ.get("BLOBLEDGER_S3TESTS_LOG")  # pytest's own output (progress)
    with open(log or os.devnull, "ab") as out:
        subprocess.run([sys.executable, "-m", "pytest", *plugins, "-q", "--no-header",
                        "-rN", "--timeout", str(timeout), "-o", "addopts=",
                        "s3tests/functional/test_s3.py"],
                       cwd=tests, env=env, stdout=out, stderr=out, check=False)
    cases: list[dict[str, Any]] = json.loads(report.read_text())
    return cases


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    """Each group's passed/failed/total (percentage) per target, as a Markdown table."""
    names = list(results)
    lines = ["| group | " + " | ".join(names) + " |",
             "| --- |" + " --- |" * len(names)]
    for group in [*GROUPS, "all"]:
        cells = []
        for name in names:
            cases = [c for c in results[name] if group in ("all", c["group"])]
            passed = sum(c["outcome"] == "passed" for c in cases)
            failed = len(cases) - passed
            share = f"{100 * passed / len(cases):.0f} %" if cases else "-"
            cells.append(f"{passed}/{failed}/{len(cases)} ({share})")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def failures(cases: list[dict[str, Any]]) -> Counter[str]:
    return Counter(c["reason"] or c["outcome"] for c in cases if c["outcome"] != "passed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/s3-tests", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default=",".join(TARGETS),
                        help=f"comma-separated, of {', '.join(TARGETS)} (default: all)")
    parser.add_argument("--only", help="comma-separated case names (default: every case "
                        "of the core groups)")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.targets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        print(f"s3-tests: unknown target {unknown[0]!r} (one of {', '.join(TARGETS)})",
              file=sys.stderr)
        return 2
    only = args.only.split(",") if args.only else None
    results: dict[str, list[dict[str, Any]]] = {}
    with checkout() as tests:
        for name in names:
            with tempfile.TemporaryDirectory(prefix=f"blobledger-s3tests-{name}-") as work, \
                    started(name, Path(work)) as target:
                print(f"s3-tests: running against {name} ...", file=sys.stderr, flush=True)
                results[name] = run(target, tests, Path(work), only)
            if args.json:  # after each target: a long run's figures survive its end
                args.json.write_text(json.dumps(results, indent=1))
    print(f"ceph/s3-tests {PINNED[:12]}, core groups: passed/failed/total (share passed)\n")
    print(table(results))
    for name, cases in results.items():
        print(f"\n{name}: failures by class")
        for text, count in failures(cases).most_common():
            print(f"  {count:4d}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
