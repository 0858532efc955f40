"""``python -m bench.headers [--rev REV] [--calls N]``: what parsing the request headers
costs per call, the hand-written parsers of ``REV`` (the revision before the move onto
werkzeug and http-sfv) against today's ``blobledger.api.headers``, side by side in one run.

The hot paths first: If-Match on every replace and delete, If-None-Match and Range on
every download. A standalone script (no ``run``: not one of ``python -m bench``'s cases),
since the figure is a per-call ratio, not a service measurement.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blobledger.api.headers as new

#: the last revision with the hand-written parsers
BEFORE = "64de8db"
DIGEST = "sha-256=:LXEWQrcmsEQBYnyp+6wy8jLPoVVVhZPgbJtJg6M8pMo=:"


def old_module(rev: str) -> types.ModuleType:
    """``blobledger.api.headers`` as it was at ``rev``, loaded beside today's."""
    root = Path(__file__).resolve().parent.parent
    source = subprocess.run(["git", "show", f"{rev}:src/blobledger/api/headers.py"],
                            cwd=root, check=True, capture_output=True, text=True).stdout
    module = types.ModuleType("blobledger.api._headers_before")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:headers.py", "exec"), module.__dict__)
    return module


def cases(m: Any) -> dict[str, Callable[[], object]]:
    return {
        'If-Match: "3" (replace, delete)': lambda: m.etag_versions('"3"'),
        'If-None-Match: W/"2", "3"': lambda: m.matches('W/"2", "3"', 3),
        "Range: bytes=1000-1999": lambda: m.parse_range("bytes=1000-1999", 10**6),
        'If-Range: "3"': lambda: m.if_range_matches('"3"', 3),
        "Repr-Digest (uploads)": lambda: m.expected_digests(DIGEST, None),
        "Content-Disposition (downloads)": lambda: m.content_disposition("a/résumé.pdf"),
    }


def per_call(func: Callable[[], object], calls: int) -> float:
    """The best of five runs, in microseconds per call."""
    return min(timeit.repeat(func, number=calls, repeat=5)) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=BEFORE)
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    old_cases, new_cases = cases(old_module(args.rev)), cases(new)
    print(f"{'header':34} {'before µs':>10} {'now µs':>10} {'ratio':>7}")
    for name, old_call in old_cases.items():
        assert repr(old_call()) == repr(new_cases[name]()), name
        before, now = per_call(old_call, args.calls), per_call(new_cases[name], args.calls)
        print(f"{name:34} {before:10.2f} {now:10.2f} {now / before:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
