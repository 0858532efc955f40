"""``python -m bench.startup --against REV``: how long a fresh process takes to import the
client, and to run a client command (``blobledger ls`` against a running ``blobledger serve``
on SQLite and local disk, holding a few documents), the working tree's blobledger against an
earlier commit's, in the same run.

Each trial is a new interpreter importing blobledger from one tree (``PYTHONPATH``: the
working tree's ``src``, or a ``git worktree`` of ``REV`` made for the run and removed after);
the trees' trials alternate, ``--repeats`` times, and the medians of wall time are printed
with their ratios, beside a bare interpreter's start (``python -c pass``) as the floor. Not a
case of ``python -m bench``: it compares code, not the ledger with its baseline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def service(folder: Path) -> Iterator[str]:
    """``blobledger serve`` (the working tree's) on SQLite and a folder, three documents in
    it; its URL."""
    from tests.support.server import blobledger_command, wait_until_ready
    from tests.support.services import free_port

    port = free_port()
    env = dict(os.environ, BLOBLEDGER_DATABASE_URL=f"sqlite:///{folder / 'ledger.db'}",
               BLOBLEDGER_STORE_URL=(folder / "blobs").as_uri())
    log = folder / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(blobledger_command("serve", "--port", str(port)), env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, process, log)
        for n in range(3):
            httpx.post(f"{url}/documents", params={"name": f"bench/{n}.txt"},
                       content=b"x" * 100).raise_for_status()
        yield url
    finally:
        process.terminate()
        process.wait(15)


def cases(url: str) -> dict[str, list[str]]:
    return {
        "python -c pass": ["-c", "pass"],
        "import blobledger.client": ["-c", "import blobledger.client"],
        # the console script's own lines (``blobledger`` is ``blobledger.cli:run``)
        "blobledger ls": ["-c", "import sys; from blobledger.cli import run; "
                          "sys.argv[0] = 'blobledger'; run()", "ls", "--url", url],
    }


def timed(src: Path, args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], env=dict(os.environ, PYTHONPATH=str(src)),
                   capture_output=True, check=True)
    return time.perf_counter() - started


def which(src: Path) -> str:
    """The file blobledger is imported from with ``src`` first (a check on the set-up)."""
    out = subprocess.run([sys.executable, "-c", "import blobledger; print(blobledger.__file__)"],
                         env=dict(os.environ, PYTHONPATH=str(src)), capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup")
    parser.add_argument("--against", default="HEAD", help="the commit to compare with")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch, \
            service(Path(scratch)) as url:
        base = Path(scratch) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.against],
                       cwd=ROOT, check=True)
        try:
            trees = {args.against: base / "src", "working tree": ROOT / "src"}
            for name, src in trees.items():
                found = which(src)
                if not found.startswith(str(src)):
                    print(f"{name}: blobledger imported from {found}, not {src}",
                          file=sys.stderr)
                    return 1
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.repeats):
                for case, argv in cases(url).items():
                    for name, src in trees.items():
                        times.setdefault((case, name), []).append(timed(src, argv))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                           check=False)
    median = {key: statistics.median(values) * 1000 for key, values in times.items()}
    print(f"wall ms of a fresh process, median of {args.repeats} "
          f"(load {os.getloadavg()[0]:.1f})")
    old_name = args.against[:14]
    print(f"{'':28}{old_name:>14}{'working tree':>14}{'new / old':>11}")
    for case in cases(url):
        old, new = median[(case, args.against)], median[(case, "working tree")]
        print(f"{case:28}{old:>14.0f}{new:>14.0f}{new / old:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
