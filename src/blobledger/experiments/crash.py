"""The child process of case C: one ``Ledger.create`` from the environment's settings.

Run as ``python -m blobledger.experiments.crash NAME`` with ``BLOBLEDGER_FAILPOINTS`` set
(``create.after_upload=kill``): the process dies by SIGKILL after the upload, before the
document is marked ready, leaving exactly what a crashed request leaves.
"""

from __future__ import annotations

import asyncio
import sys

from blobledger.protocol.ledger import Ledger


async def _create(name: str) -> None:
    async with Ledger.from_env(migrate=False) as ledger:
        await ledger.create(name, b"bytes of a request that crashed", content_type="text/plain")


def main() -> None:
    asyncio.run(_create(sys.argv[1] if len(sys.argv) > 1 else "crashed.txt"))


if __name__ == "__main__":
    main()
