"""The signature of a delivery is the one the Standard Webhooks specification gives for its
own example (https://www.standardwebhooks.com/): the wire format does not hang on the
library that computes it."""

from __future__ import annotations

from blobledger._base import webhooks

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
MESSAGE_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
TIMESTAMP = 1614265330
BODY = b'{"test": 2432232314}'
SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specifications_example() -> None:
    assert webhooks.sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY) == SIGNATURE
    assert webhooks.headers(SECRET, MESSAGE_ID, BODY, TIMESTAMP) == {
        "webhook-id": MESSAGE_ID, "webhook-timestamp": str(TIMESTAMP),
        "webhook-signature": SIGNATURE, "content-type": "application/json"}


def test_another_body_id_or_time_signs_otherwise() -> None:
    others = {webhooks.sign(SECRET, MESSAGE_ID, TIMESTAMP, BODY + b" "),
              webhooks.sign(SECRET, MESSAGE_ID + "x", TIMESTAMP, BODY),
              webhooks.sign(SECRET, MESSAGE_ID, TIMESTAMP + 1, BODY)}
    assert SIGNATURE not in others and len(others) == 3
