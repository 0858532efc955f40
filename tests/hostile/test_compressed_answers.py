"""A hostile server's compressed success answer against the typed client and the CLI: a
quarter of a megabyte of gzip that decodes to 256 MiB is refused as a body too long
(``BadAnswer``, one line and exit 1 in the CLI) once the first 16 MiB decoded, never read
whole. Each case runs in a subprocess whose peak resident set is measured (``wait4``)."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.receivers import gzip_of_zeros
from tests.hostile.scripted import Hostile, Reply, running
from tests.hostile.support import clean_env
from tests.support.server import blobledger_command

BOMB = 256 * 1024 * 1024
#: a subprocess's peak resident set, at most (KiB): reading the bomb whole costs more than
#: twice the bomb (its chunks, then their join), over 512 MiB; bounded, under 200 MiB
BOUND = 320 * 1024


@functools.cache
def bomb() -> bytes:
    return gzip_of_zeros(BOMB)


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    yield from running()


def _peak(command: list[str], env: dict[str, str]) -> tuple[int, bytes, int]:
    """Run ``command`` (a Python program, under :data:`MEASURED`): its exit code, its stderr
    and its peak resident set in KiB, as the child read its own ``VmHWM`` at its end (the
    ``wait4`` usage of a forked child counts its parent's size before the exec)."""
    done = subprocess.run([sys.executable, "-c", MEASURED, *command], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                          check=False)
    err, _, peak = done.stderr.rpartition(b"VmHWM:")
    return done.returncode, err, int(peak.split()[0])


#: runs the program named by its first argument, then writes its own peak (VmHWM)
MEASURED = """
import runpy, sys
from pathlib import Path
program, sys.argv = sys.argv[1], sys.argv[1:]
try:
    runpy.run_path(program, run_name="__main__")
finally:
    status = Path("/proc/self/status").read_text().splitlines()
    print([line for line in status if line.startswith("VmHWM:")][0], file=sys.stderr)
"""


SCRIPT = """
import sys
from blobledger.client import Client
from blobledger.client._answers import BadAnswer
with Client(sys.argv[1]) as client:
    try:
        {call}
    except BadAnswer as exc:
        print(exc, file=sys.stderr)
        sys.exit(7)
"""


@pytest.mark.parametrize("call", ["client.get('doc_1')", "list(client.documents())"])
def test_the_client_refuses_a_success_body_past_its_bound(hostile: Hostile, call: str,
                                                         tmp_path: Path) -> None:
    hostile.respond = lambda request: Reply(200, bomb(), {"Content-Type": "application/json",
                                                          "Content-Encoding": "gzip"})
    script = tmp_path / "call.py"
    script.write_text(SCRIPT.format(call=call))
    code, err, peak = _peak([str(script), hostile.url], clean_env())
    assert peak < BOUND, peak
    assert code == 7, err
    assert b"with a body of more than 16777216 bytes" in err


def test_ls_refuses_a_success_body_past_its_bound(hostile: Hostile) -> None:
    hostile.respond = lambda request: Reply(200, bomb(), {"Content-Type": "application/json",
                                                          "Content-Encoding": "gzip"})
    code, err, peak = _peak(blobledger_command("ls"), clean_env(BLOBLEDGER_URL=hostile.url))
    assert peak < BOUND, peak
    assert code == 1, err
    assert b"with a body of more than 16777216 bytes" in err
    assert b"Traceback" not in err
