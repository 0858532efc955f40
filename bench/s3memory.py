"""``python -m bench.s3memory``: the memory a 64 MiB put holds on S3 (moto), per put in
flight: the SDK's own PutObject of a body in memory, and the store's put of the same body
given whole or streamed (64 KiB chunks, as from HTTP) with the default single-put limit
(a multipart upload) and one above the body (one PutObject).

Each figure is a fresh process (``--one MODE CONCURRENCY``): its peak resident memory
(``VmHWM``, reset through ``/proc/self/clear_refs``) above its resident memory before the
puts, the payload already resident, divided by the puts in flight. A process that had
run other trials would reuse the memory they freed, and show less."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

from tests.support.services import start_moto

MIB = 1024 * 1024
MODES = ("sdk", "whole-multipart", "whole-single", "streamed-multipart", "streamed-single")


def resident() -> tuple[int, int]:
    """This process's (resident, peak resident) memory in bytes."""
    found = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")



async def one_process(mode: str, concurrency: int) -> float:
    moto = start_moto()
    try:
        single = mode.endswith("-single")
        store = moto.store(single_put_limit=64 * MIB if single else 8 * MIB)
        await store.prepare()
        s3 = await store._client()
        await s3.put_object(Bucket=store.bucket, Key="warm", Body=b"x")
        payload = os.urandom(64 * MIB)

        async def body() -> AsyncIterator[bytes]:
            if mode.startswith("streamed-"):
                for at in range(0, len(payload), 64 * 1024):
                    yield payload[at:at + 64 * 1024]
            else:
                yield payload

        async def put(i: int) -> None:
            if mode == "sdk":
                await s3.put_object(Bucket=store.bucket, Key=f"sdk-{i}", Body=payload)
            else:
                await store.put(f"{mode}-{uuid.uuid4().hex}", body(), tags={"state": "pending"})

        reset_peak()
        before, _ = resident()
        await asyncio.gather(*(put(i) for i in range(concurrency)))
        _, peak = resident()
        await store.close()
        return (peak - before) / MIB / concurrency
    finally:
        moto.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.s3memory")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "CONCURRENCY"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.one:
        print(f"{asyncio.run(one_process(args.one[0], int(args.one[1]))):.0f}")
        return 0
    print(f"{'64 MiB put, MiB held per put in flight':<40} {'c1':>10} {'c4':>10}")
    for mode in MODES:
        cells = []
        for concurrency in (1, 4):
            found = [subprocess.run(
                [sys.executable, "-m", "bench.s3memory", "--one", mode, str(concurrency)],
                check=True, capture_output=True, text=True).stdout.strip()
                for _ in range(args.repeats)]
            cells.append("/".join(found))
        print(f"{mode:<40} {cells[0]:>10} {cells[1]:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
