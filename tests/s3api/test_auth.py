"""SigV4 as the endpoint checks it, with botocore signing as clients do: a wrong secret, an
unknown key, no signature, a skewed clock, presigned URLs within and past their expiry, a
captured request replayed."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import botocore.auth
import httpx
import pytest
from botocore.exceptions import ClientError

from tests.s3api.conftest import BUCKET, WRITER, client, on
from tests.s3api.test_objects import error
from tests.support.server import Server

# the signature is checked before the ledger opens a transaction or a store call: one server
pytestmark = on("sqlite-local")


@pytest.fixture
def clock_shift(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Move the clock botocore signs with (the client's, not the server's)."""

    def shift(seconds: float) -> None:
        real = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
        monkeypatch.setattr(botocore.auth, "get_current_datetime",
                            lambda: real + datetime.timedelta(seconds=seconds))

    yield shift


def test_a_wrong_secret_is_signature_does_not_match(s3_server: Server, s3: Any,
                                                    prefix: str) -> None:
    forger = client(s3_server, (WRITER[0], "not-the-secret-0123456789"))
    with pytest.raises(ClientError) as refused:
        forger.put_object(Bucket=BUCKET, Key=prefix + "forged", Body=b"forged")
    assert error(refused) == (403, "SignatureDoesNotMatch")
    with pytest.raises(ClientError) as listing:
        forger.list_objects_v2(Bucket=BUCKET)
    assert error(listing) == (403, "SignatureDoesNotMatch")
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)


def test_an_unknown_key_and_no_signature_are_refused(s3_server: Server) -> None:
    stranger = client(s3_server, ("AKIDSTRANGER", "whatever-secret-0123456789"))
    with pytest.raises(ClientError) as unknown:
        stranger.list_buckets()
    assert error(unknown) == (403, "InvalidAccessKeyId")
    bare = httpx.get(f"{s3_server.url}/s3/{BUCKET}?list-type=2")
    assert bare.status_code == 403 and "<Code>AccessDenied</Code>" in bare.text


@pytest.mark.parametrize("seconds", [-16 * 60, 16 * 60])
def test_a_skewed_clock_is_refused(s3_server: Server, prefix: str, clock_shift: Any,
                                   seconds: int) -> None:
    clock_shift(seconds)
    skewed = client(s3_server)
    with pytest.raises(ClientError) as refused:
        skewed.put_object(Bucket=BUCKET, Key=prefix + "late", Body=b"late")
    assert error(refused) == (403, "RequestTimeTooSkewed")


def test_a_clock_within_the_skew_is_accepted(s3_server: Server, prefix: str,
                                             clock_shift: Any) -> None:
    clock_shift(-14 * 60)
    client(s3_server).put_object(Bucket=BUCKET, Key=prefix + "slow", Body=b"slow clock")
    assert client(s3_server).get_object(Bucket=BUCKET, Key=prefix + "slow")[
        "Body"].read() == b"slow clock"


def test_presigned_get_and_put_work(s3_server: Server, s3: Any, prefix: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=prefix + "shared file", Body=b"shared")
    url = s3.generate_presigned_url("get_object", ExpiresIn=300,
                                    Params={"Bucket": BUCKET, "Key": prefix + "shared file"})
    got = httpx.get(url)
    assert got.status_code == 200 and got.content == b"shared"
    tampered = url.replace("shared%20file", "shared%20filf")
    assert httpx.get(tampered).status_code == 403
    put_url = s3.generate_presigned_url("put_object", ExpiresIn=300,
                                        Params={"Bucket": BUCKET, "Key": prefix + "dropped"})
    assert httpx.put(put_url, content=b"dropped in").status_code == 200
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "dropped")["Body"].read() == b"dropped in"


def test_an_expired_presigned_url_is_refused(s3_server: Server, s3: Any, prefix: str,
                                             clock_shift: Any) -> None:
    s3.put_object(Bucket=BUCKET, Key=prefix + "old", Body=b"old")
    clock_shift(-3600)  # signed an hour ago, for ten minutes
    url = client(s3_server).generate_presigned_url(
        "get_object", ExpiresIn=600, Params={"Bucket": BUCKET, "Key": prefix + "old"})
    refused = httpx.get(url)
    assert refused.status_code == 403, refused.text
    assert "<Code>AccessDenied</Code>" in refused.text and "expired" in refused.text
    clock_shift(0)
    # presigned to expire before it was made (a negative X-Amz-Expires): expired too
    negative = client(s3_server).generate_presigned_url(
        "put_object", ExpiresIn=-1000, Params={"Bucket": BUCKET, "Key": prefix + "old"})
    refused = httpx.put(negative, content=b"new")
    assert refused.status_code == 403, refused.text
    assert "<Code>AccessDenied</Code>" in refused.text and "expired" in refused.text
    # presigned to expire as it was made (X-Amz-Expires=0): expired as well
    instant = client(s3_server).generate_presigned_url(
        "get_object", ExpiresIn=0, Params={"Bucket": BUCKET, "Key": prefix + "old"})
    refused = httpx.get(instant)
    assert refused.status_code == 403, refused.text
    assert "<Code>AccessDenied</Code>" in refused.text and "expired" in refused.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "old")["Body"].read() == b"old"


def test_a_presigned_url_that_would_outlive_seven_days_is_refused(
        s3_server: Server, s3: Any, prefix: str) -> None:
    """As S3 does: X-Amz-Expires from 1 s to 7 days (604800 s); a longer one is refused
    whole, never admitted until some later expiry."""
    s3.put_object(Bucket=BUCKET, Key=prefix + "long", Body=b"long")
    for expires in (604800, 604801):
        url = s3.generate_presigned_url("get_object", ExpiresIn=expires,
                                        Params={"Bucket": BUCKET, "Key": prefix + "long"})
        answer = httpx.get(url)
        if expires == 604800:
            assert answer.status_code == 200 and answer.content == b"long"
        else:
            assert answer.status_code == 400, answer.text
            assert "<Code>AuthorizationQueryParametersError</Code>" in answer.text


def test_a_sigv2_presigned_url_is_refused_with_the_way_out(s3_server: Server, s3: Any,
                                                           prefix: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=prefix + "v2", Body=b"v2")
    v2 = client(s3_server, signature_version="s3")
    url = v2.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": prefix + "v2"})
    refused = httpx.get(url)
    assert refused.status_code == 403 and "s3v4" in refused.text


def test_a_replayed_request_does_only_what_it_did(s3_server: Server, s3: Any,
                                                   prefix: str) -> None:
    """A captured header-signed PUT, sent again within the skew: a create (``If-None-Match:
    *``) is refused once the key exists, and a signed payload cannot carry other bytes."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{s3_server.url}/s3/{BUCKET}/{prefix}replayed"
    body = b"the bytes that were signed"
    signed = AWSRequest(method="PUT", url=url, data=body, headers={"If-None-Match": "*"})
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(signed)
    headers = {name.lower(): value for name, value in signed.headers.items()}
    assert headers["x-amz-content-sha256"] != "UNSIGNED-PAYLOAD"
    assert httpx.put(url, content=body, headers=headers).status_code == 200
    again = httpx.put(url, content=body, headers=headers)
    assert again.status_code == 412 and "<Code>PreconditionFailed</Code>" in again.text
    other = {k: v for k, v in headers.items() if k != "if-none-match"}
    swapped = httpx.put(url, content=b"other bytes, same length!!", headers=other)
    assert swapped.status_code == 403  # If-None-Match was signed: dropping it breaks it
    stored = s3.get_object(Bucket=BUCKET, Key=prefix + "replayed")["Body"].read()
    assert stored == body
    plain = AWSRequest(method="PUT", url=url, data=body)
    S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1").add_auth(plain)
    forged = httpx.put(url, content=b"other bytes, same length!!",
                       headers=dict(plain.headers.items()))
    assert forged.status_code == 400 and "XAmzContentSHA256Mismatch" in forged.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "replayed")["Body"].read() == body
