"""``python -m tests.soak [--seconds 120] [--store azure|s3]``: the soak on its own Azurite
(or moto's S3 server) and a fresh PostgreSQL database; prints the totals, exits 1 on any
violation."""

from __future__ import annotations

import argparse
import asyncio
import sys

from tests.soak.run import azure_storage, s3_storage, soak
from tests.support.services import (
    create_database,
    drop_database,
    start_azurite,
    start_moto,
    temp_dir,
)


async def main(args: argparse.Namespace) -> int:
    server = start_azurite() if args.store == "azure" else start_moto()
    storage = (azure_storage(server) if args.store == "azure"  # type: ignore[arg-type]
               else s3_storage(server))  # type: ignore[arg-type]
    url = await create_database()
    try:
        with temp_dir("blobledger-soak-") as folder:
            totals = await soak(storage, url, folder, seconds=args.seconds,
                                servers=args.servers, workers=args.workers,
                                fault_rate=args.fault_rate, seed=args.seed)
            print(totals.render())
            if totals.violations:
                print(f"logs were in {folder} (removed)", file=sys.stderr)
    finally:
        await drop_database(url)
        server.stop()
    return 1 if totals.violations else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0, help="load duration (120)")
    parser.add_argument("--servers", type=int, default=3, help="serve processes (3)")
    parser.add_argument("--workers", type=int, default=6, help="concurrent client tasks (6)")
    parser.add_argument("--fault-rate", type=float, default=0.03,
                        help="share of storage requests given a fault (0.03)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", choices=["azure", "s3"], default="azure",
                        help="Azurite or moto's S3 server (azure)")
    sys.exit(asyncio.run(main(parser.parse_args())))
