"""A webhook receiver as a user would write one: every delivery verified with the
``standardwebhooks`` package (a bad signature is answered 401 and not counted), counted by
its ``webhook-id``; it can refuse its first deliveries (500) to exercise the retries."""

from __future__ import annotations

import base64
import contextlib
import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.support.threaded import serving

SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


@dataclass
class Receiver:
    """What the receiver saw: the verified deliveries in arrival order, the refused ones."""

    secret: str = SECRET
    refuse_first: int = 0  # answer 500 to this many deliveries first
    refuse_all: bool = False
    deliveries: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    bad_signatures: int = 0
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def handle(self, body: bytes, headers: dict[str, str]) -> int:
        try:
            payload = Webhook(self.secret).verify(body, headers)
        except WebhookVerificationError:
            with self.lock:
                self.bad_signatures += 1
            return 401
        with self.lock:
            if self.refuse_all or self.refused < self.refuse_first:
                self.refused += 1
                return 500
            self.deliveries.append((headers["webhook-id"], payload))
        return 204

    @property
    def counts(self) -> Counter[str]:
        """Deliveries per ``webhook-id``."""
        with self.lock:
            return Counter(message_id for message_id, _ in self.deliveries)

    def order(self, subject: str) -> list[str]:
        """The types delivered for one document (or attachment), first delivery each."""
        seen: dict[str, str] = {}
        with self.lock:
            for message_id, payload in self.deliveries:
                data = payload["data"]
                if subject in (data.get("document_id"), data.get("blob")):
                    seen.setdefault(message_id, payload["type"])
        return list(seen.values())


@contextlib.contextmanager
def receiving(receiver: Receiver | None = None) -> Iterator[Receiver]:
    """The receiver listening on a loopback port (``receiver.url``) until the block ends."""
    found = receiver or Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            status = found.handle(body, {k.lower(): v for k, v in self.headers.items()})
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    with serving(server):
        yield found

