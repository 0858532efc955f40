"""Standard Webhooks signing (https://www.standardwebhooks.com/): the three headers of a
delivery, signed by the ``standardwebhooks`` package, the specification's own library, with
which receivers verify them (``Webhook(secret).verify(body, headers)``): the signature is
the receivers' by construction.

The signature is ``v1,`` and the base64 of HMAC-SHA256, keyed with the secret's bytes (the
base64 after ``whsec_``), of ``{webhook-id}.{webhook-timestamp}.{body}``. The id is the event's
(the same on every retry: a receiver deduplicates on it); the timestamp is the attempt's, in
whole seconds since the epoch (receivers refuse one too far from their clock).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from standardwebhooks.webhooks import Webhook


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of one delivery (the body is the event's JSON)."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return Webhook(secret).sign(message_id, moment, body.decode())


def headers(secret: str, message_id: str, body: bytes,
            timestamp: int | None = None) -> dict[str, str]:
    """The headers of one delivery (with ``content-type: application/json``)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {"webhook-id": message_id, "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, message_id, stamp, body),
            "content-type": "application/json"}
