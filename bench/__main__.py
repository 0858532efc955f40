"""``python -m bench [--quick] [--json] [--only CASE ...] [--latency MS ...] [--repeats N]
[--sizes SIZE ...] [--stores STORE ...]``:
every case, one table, and the ratios by added round-trip time."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.latency import start_process
from tests.support.services import create_database, drop_database, start_azurite, start_moto

from bench.common import Context, Result, latency_table, table

SKIP = {"common", "__main__"}
#: added round-trip times (ms) every storage case also runs at, beside loopback
LATENCIES = (2, 20)
QUICK_LATENCIES = (20,)


def cases() -> dict[str, Any]:
    found = {}
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if module.name.startswith("_") or module.name in SKIP:
            continue
        loaded = importlib.import_module(f"bench.{module.name}")
        if hasattr(loaded, "run"):
            found[module.name] = loaded
    return dict(sorted(found.items()))


async def main_async(args: argparse.Namespace) -> int:
    selected = cases()
    if args.only:
        unknown = set(args.only) - set(selected)
        if unknown:
            print(f"bench: unknown case(s): {', '.join(sorted(unknown))}; "
                  f"known: {', '.join(selected)}", file=sys.stderr)
            return 2
        selected = {k: v for k, v in selected.items() if k in args.only}
    if args.latency is None:
        args.latency = QUICK_LATENCIES if args.quick else LATENCIES
    latencies = tuple(sorted({float(ms) for ms in [0, *args.latency]}))
    notes: list[str] = []
    results: list[Result] = []
    for name, module in selected.items():
        print(f"# {name}: {getattr(module, 'TITLE', '')}", file=sys.stderr, flush=True)
        started = time.monotonic()
        found = await run_case(module, args.quick, latencies, notes, args.repeats,
                               sizes=tuple(args.sizes or ()), stores=tuple(args.stores or ()),
                               scale=args.scale or (1 if args.quick else 10))
        results.extend(found)
        print(table(found), file=sys.stderr, flush=True)  # kept if a later case fails
        print(f"# {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    machine = f"{platform.node()} {platform.machine()} python {platform.python_version()}"
    if args.json:
        print(json.dumps({"machine": machine, "quick": args.quick, "latencies_ms": latencies,
                          "notes": notes,
                          "results": [r.to_json() for r in results]}, indent=2))
    else:
        print(f"machine: {machine}{' (quick run)' if args.quick else ''}")
        print(table(results))
        by_latency = latency_table(results)
        if by_latency:
            print()
            print(by_latency)
        for note in notes:
            print(f"note: {note}")
        missed = [r for r in results if not r.met]
        print(f"{len(results) - len(missed)} targets met, {len(missed)} missed"
              + (": " + ", ".join(r.case for r in missed) if missed else ""))
    return 0


async def run_case(module: Any, quick: bool, latencies: tuple[float, ...],
                   notes: list[str], repeats: int | None = None, *,
                   sizes: tuple[int, ...] = (), stores: tuple[str, ...] = (),
                   scale: int = 1) -> list[Result]:
    """One case on emulators and a database of its own: Azurite keeps cleaning up a deleted
    container (the reconciler's 20,000 blobs, the create case's gigabytes) long after it
    answered, on the same cores, and that must not weigh on the next case's figures."""
    azurite = start_azurite()
    moto = start_moto()
    ctx = Context(azurite=azurite, postgres_url=await create_database(), quick=quick,
                  repeats=repeats or (1 if quick else 3), moto=moto, latencies=latencies,
                  sizes=sizes, stores=stores, scale=scale)
    try:
        for ms in latencies[1:]:
            ctx.proxies["azure", ms] = start_process(azurite.port, ms)
            ctx.proxies["s3", ms] = start_process(moto.port, ms)
        return list(await module.run(ctx))
    finally:
        notes += ctx.notes
        for proxy in ctx.proxies.values():
            proxy.stop()
        azurite.stop()
        moto.stop()
        await drop_database(ctx.postgres_url)


def _size(text: str) -> int:
    """``4KiB``, ``64MiB`` or a number of bytes."""
    for suffix, factor in (("KiB", 1024), ("MiB", 1024 * 1024)):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * factor
    return int(text)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (CI)")
    parser.add_argument("--json", action="store_true", help="results as JSON")
    parser.add_argument("--only", nargs="+", metavar="CASE", help="run only these cases")
    parser.add_argument("--repeats", type=int, metavar="N",
                        help="interleaved repeats per figure (default: 3; with --quick 1)")
    parser.add_argument("--sizes", nargs="+", type=_size, metavar="SIZE",
                        help="only these payload sizes (4KiB, 64MiB, ...) in the cases that "
                        "honour it (retag)")
    parser.add_argument("--stores", nargs="+", choices=("azure", "s3", "local"),
                        help="only these stores in the cases that honour it (retag)")
    parser.add_argument("--scale", type=int, default=None, metavar="K",
                        help="K times the creates of each 4 KiB trial in the cases that "
                        "honour it (retag): a sustained load, against which the retag "
                        "worker's linger before it claims is short (default 10; with "
                        "--quick 1)")
    parser.add_argument(
        "--latency", nargs="*", type=float, metavar="MS",
        help="added round-trip times in ms, each case also run through a delaying proxy "
        f"at each (default: {' '.join(map(str, LATENCIES))}; with --quick "
        f"{' '.join(map(str, QUICK_LATENCIES))}; none: loopback only)")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
