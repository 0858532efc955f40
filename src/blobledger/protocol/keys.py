"""The service's own secrets (``service_keys``): generated once, kept in the database.

A key is written by the first process that needs it (a random 256-bit value) and read by
every other one, so every instance of a deployment shares it without configuration. Two
processes asking at once both try to insert; the primary key lets one win and both read the
winner's. Nothing here is ever sent to a client.
"""

from __future__ import annotations

import secrets

from sqlalchemy import Table, insert, select
from sqlalchemy.exc import IntegrityError

from blobledger.db import Database
from blobledger.protocol.models import ServiceKeyRow, utcnow

service_keys: Table = ServiceKeyRow.__table__  # type: ignore[assignment]
#: the key of the service's own read URLs and download links (``api/links.py``)
SIGNING = "signing"


async def service_key(db: Database, name: str) -> bytes:
    """The key ``name``, generated and stored on first use."""
    query = select(service_keys.c.value).where(service_keys.c.name == name)
    async with db.transaction(readonly=True) as conn:
        value = (await conn.execute(query)).scalar_one_or_none()
    if value is None:
        try:
            async with db.transaction() as conn:
                await conn.execute(insert(service_keys).values(
                    name=name, value=secrets.token_hex(32), created_at=utcnow()))
        except IntegrityError:  # another process stored it first: its key is the key
            pass
        async with db.transaction(readonly=True) as conn:
            value = (await conn.execute(query)).scalar_one()
    return bytes.fromhex(value)
