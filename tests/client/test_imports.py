"""The client, and the CLI's commands that talk to a service, load neither the database layer
(SQLAlchemy, Alembic, the ledger) nor the storage SDKs: a program that only talks HTTP does
not pay for them at import, and ``blobledger ls`` starts in a fraction of the time. Checked in
a fresh interpreter, as a user's program or the command starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: top-level packages and blobledger's own layers a client never needs
HEAVY = ("sqlalchemy", "alembic", "asyncpg", "psycopg", "aiosqlite", "azure", "boto3",
         "botocore", "aiobotocore", "starlette", "fastapi", "uvicorn", "blobledger.protocol",
         "blobledger.stores", "blobledger.workers", "blobledger.api", "blobledger.config")


def loaded(*modules: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after importing ``modules``."""
    code = ("import json, sys\n"
            "heavy = json.loads(sys.argv[2])\n"
            "for name in json.loads(sys.argv[1]): __import__(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules for h in heavy\n"
            "                        if m == h or m.startswith(h + '.'))))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(modules), json.dumps(HEAVY)],
                         capture_output=True, text=True, check=True, timeout=60)
    return list(json.loads(out.stdout))


@pytest.mark.parametrize("module", [
    "blobledger.client", "blobledger.cli.ls", "blobledger.cli.put", "blobledger.cli.get",
    "blobledger.cli.show", "blobledger.cli.rm"])
def test_a_client_loads_no_database_or_storage_layer(module: str) -> None:
    assert loaded("blobledger", module) == []


def test_the_ledger_is_still_one_import_away() -> None:
    """``from blobledger import Ledger`` loads it on first use; and the probe above does
    see the layers once they are imported."""
    code = ("import sys\nfrom blobledger import Document, Ledger\nimport blobledger\n"
            "assert Ledger.__module__ == 'blobledger.protocol.ledger'\n"
            "assert Document.__module__ == 'blobledger.protocol.documents'\n"
            "assert {'Ledger', 'Document'} <= set(dir(blobledger))\n"
            "assert 'sqlalchemy' in sys.modules\n"
            "try:\n    blobledger.Nothing\nexcept AttributeError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "module 'blobledger' has no attribute 'Nothing'"
    assert loaded("blobledger.protocol.ledger")  # the probe does see the layers
