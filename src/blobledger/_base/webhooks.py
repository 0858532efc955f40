"""Standard Webhooks signing (https://www.standardwebhooks.com/): the three headers of a
delivery, so that a receiver verifies it with any Standard Webhooks library (the
``standardwebhooks`` package: ``Webhook(secret).verify(body, headers)``).

The signature is ``v1,`` and the base64 of HMAC-SHA256, keyed with the secret's bytes (the
base64 after ``whsec_``), of ``{webhook-id}.{webhook-timestamp}.{body}``. The id is the event's
(the same on every retry: a receiver deduplicates on it); the timestamp is the attempt's, in
whole seconds since the epoch (receivers refuse one too far from their clock).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

SECRET_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """The key bytes of a ``whsec_…`` secret."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of one delivery."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(secret: str, message_id: str, body: bytes,
            timestamp: int | None = None) -> dict[str, str]:
    """The headers of one delivery (with ``content-type: application/json``)."""
    stamp = int(time.time()) if timestamp is None else timestamp
    return {"webhook-id": message_id, "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, message_id, stamp, body),
            "content-type": "application/json"}
