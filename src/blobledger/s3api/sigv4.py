"""SigV4 verification of the S3 endpoint's requests: header-signed and presigned alike.

Nothing here signs by hand. The request as the client sent it (method, raw path, query,
the headers it says it signed) is rebuilt as a botocore ``AWSRequest``, and botocore's own
``S3SigV4Auth`` (or ``S3SigV4QueryAuth`` for a presigned URL) computes the canonical
request, the string to sign and the signature from it with the secret of the key the
request names; the two signatures are compared in constant time. A request whose clock is
more than :data:`CLOCK_SKEW` away from ours is refused (``RequestTimeTooSkewed``), and so
is a presigned URL past its ``X-Amz-Expires``.

A request that carries no signature at all (no ``Authorization`` header, no ``X-Amz-*``
nor SigV2 query) is anonymous (:data:`ANONYMOUS`): it may do only what a bucket's or an
object's canned ACL grants everyone (:mod:`.access`). A request that carries one is never
anonymous: a bad signature is refused, never read as no signature.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from blobledger.s3api.errors import S3Error

ALGORITHM = "AWS4-HMAC-SHA256"
#: the largest difference between the client's clock and ours (S3's own: 15 minutes)
CLOCK_SKEW = 15 * 60
#: the longest a presigned URL may live (S3's own: 7 days)
MAX_EXPIRES = 7 * 24 * 3600
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: ``aws-chunked`` bodies: each chunk signed (its signature chained from the request's), or
#: unsigned chunks with a trailer of checksums (what botocore sends over HTTPS)
STREAMING_SIGNED = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
STREAMING_UNSIGNED_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
STREAMING = frozenset({STREAMING_SIGNED, STREAMING_UNSIGNED_TRAILER})
_STAMP = "%Y%m%dT%H%M%SZ"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
AccessKeys = Mapping[str, tuple[str, frozenset[str]]]


@dataclass(frozen=True)
class Chain:
    """What an ``aws-chunked`` body's chunk signatures are computed with: botocore's signer
    of the request, the request (its timestamp in its context), and the request's own
    signature, the seed of the chain."""

    auth: S3SigV4Auth
    request: AWSRequest
    seed: str

    def chunk_signature(self, previous: str, chunk_sha256: str) -> str:
        """The signature of a chunk whose data has ``chunk_sha256``, after ``previous``."""
        timestamp = self.request.context["timestamp"]
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", timestamp,
                             self.auth.credential_scope(self.request), previous,
                             EMPTY_SHA256, chunk_sha256])
        return str(self.auth.signature(to_sign, self.request))


@dataclass(frozen=True)
class Signed:
    """A request whose signature holds: the key that signed it, its scopes, and the
    ``x-amz-content-sha256`` it declared (``UNSIGNED-PAYLOAD``, a SHA-256 in hex that the
    body must match, or an ``aws-chunked`` body's ``STREAMING-*``, with the chain its
    signed chunks are checked by)."""

    key_id: str
    scopes: frozenset[str]
    payload: str
    chain: Chain | None = None


#: the key id of an unsigned request (no key has an empty id)
ANONYMOUS = ""


def anonymous(headers: Mapping[str, str]) -> Signed:
    """An unsigned request: no key, no scope; its body's declared SHA-256 (or the unsigned
    trailer form of ``aws-chunked``) still checked, as a signed one's."""
    payload = headers.get("x-amz-content-sha256", UNSIGNED_PAYLOAD)
    if not (is_sha256(payload) or payload == STREAMING_UNSIGNED_TRAILER):
        payload = UNSIGNED_PAYLOAD
    return Signed(ANONYMOUS, frozenset(), payload)


def is_sha256(payload: str) -> bool:
    """Whether a declared payload is a SHA-256 of the body (in hex) the body must match."""
    return bool(_HEX64.match(payload))


@dataclass(frozen=True)
class Seen:
    """The request as it arrived: what the signature covers."""

    method: str
    host: str
    raw_path: str  # percent-encoded, exactly as sent (S3 does not normalise it)
    query: Sequence[tuple[str, str]]  # decoded pairs, in order
    headers: Mapping[str, str]  # lower-case names; repeated ones joined with ","


def verify(seen: Seen, keys: AccessKeys, now: float) -> Signed:
    """The key that signed ``seen``, or the S3 error that refuses it."""
    query = dict(seen.query)
    if "X-Amz-Signature" in query or "X-Amz-Algorithm" in query:
        return _presigned(seen, query, keys, now)
    if "AWSAccessKeyId" in query or "Signature" in query:
        raise S3Error("AccessDenied", "SigV2 presigned URLs are not accepted: presign with "
                      "SigV4 (boto3: Config(signature_version='s3v4'))")
    authorization = seen.headers.get("authorization")
    if authorization is None:
        return anonymous(seen.headers)
    return _header_signed(seen, authorization, keys, now)


def _fields(authorization: str) -> dict[str, str]:
    algorithm, _, rest = authorization.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise S3Error("InvalidArgument", f"only {ALGORITHM} (SigV4) signatures are accepted")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name] = value
    if not {"Credential", "SignedHeaders", "Signature"} <= fields.keys():
        raise S3Error("AuthorizationHeaderMalformed",
                      "the Authorization header needs Credential, SignedHeaders and Signature")
    return fields


def _credential(text: str, keys: AccessKeys) -> tuple[str, str, str, str]:
    """(key id, date, region, secret) of ``KEYID/DATE/REGION/s3/aws4_request``."""
    parts = text.split("/")
    if len(parts) != 5 or parts[3] != "s3" or parts[4] != "aws4_request":
        raise S3Error("AuthorizationHeaderMalformed",
                      "the credential must be KEYID/DATE/REGION/s3/aws4_request")
    key_id, date, region = parts[0], parts[1], parts[2]
    found = None
    for known, (secret, _) in keys.items():  # every key compared: no early exit to time
        if hmac.compare_digest(known.encode(), key_id.encode()):
            found = secret
    if found is None:
        raise S3Error("InvalidAccessKeyId",
                      "the access key id you provided does not exist in our records")
    return key_id, date, region, found


def _stamp(text: str | None) -> float:
    if text is None:
        raise S3Error("AccessDenied", "AWS authentication requires a valid x-amz-date")
    try:
        return datetime.strptime(text, _STAMP).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise S3Error("AccessDenied", "x-amz-date is not a date (YYYYMMDDTHHMMSSZ)") from None


def _request(seen: Seen, signed_headers: str, query: Sequence[tuple[str, str]]) -> AWSRequest:
    names = signed_headers.split(";")
    if "host" not in names:
        raise S3Error("SignatureDoesNotMatch", "the signed headers must include host")
    missing = [name for name in names if name not in seen.headers]
    if missing:
        raise S3Error("SignatureDoesNotMatch", f"signed header {missing[0]} is not sent")
    request = AWSRequest(method=seen.method, url=f"http://{seen.host}{seen.raw_path}",
                         headers={name: seen.headers[name] for name in names})
    request.params = list(query)  # canonicalised (encoded and sorted) by botocore
    return request


def _check(auth: S3SigV4Auth, request: AWSRequest, stamp: str, signed_headers: str,
           signature: str) -> None:
    request.context["timestamp"] = stamp
    canonical = auth.canonical_request(request)
    expected = auth.signature(auth.string_to_sign(request, canonical), request)
    # botocore signs every header it is given but those it never signs (Expect, ...)
    same_headers = auth.signed_headers(auth.headers_to_sign(request)) == signed_headers
    if not (hmac.compare_digest(expected.encode(), signature.encode()) and same_headers):
        raise S3Error("SignatureDoesNotMatch", "the request signature we calculated does "
                      "not match the signature you provided: check your key and signing "
                      "method")


def _header_signed(seen: Seen, authorization: str, keys: AccessKeys, now: float) -> Signed:
    fields = _fields(authorization)
    key_id, date, region, secret = _credential(fields["Credential"], keys)
    stamp = seen.headers.get("x-amz-date")
    when = _stamp(stamp)
    assert stamp is not None
    if abs(now - when) > CLOCK_SKEW:
        raise S3Error("RequestTimeTooSkewed", "the difference between the request time and "
                      "the server's time is too large (15 minutes at most)")
    if date != stamp[:8]:
        raise S3Error("AuthorizationHeaderMalformed",
                      "the credential's date is not the date of x-amz-date")
    payload = seen.headers.get("x-amz-content-sha256")
    if payload is None or "x-amz-content-sha256" not in fields["SignedHeaders"].split(";"):
        raise S3Error("InvalidRequest", "missing required header for this request: a signed "
                      "x-amz-content-sha256")
    if payload.startswith("STREAMING-") and payload not in STREAMING:
        raise S3Error("NotImplemented", f"{payload} payloads are not implemented (only "
                      f"{', '.join(sorted(STREAMING))}, UNSIGNED-PAYLOAD or a SHA-256)")
    if payload != UNSIGNED_PAYLOAD and payload not in STREAMING and not _HEX64.match(payload):
        raise S3Error("InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, "
                      "a SHA-256 in hex or STREAMING-*")
    auth = S3SigV4Auth(Credentials(key_id, secret), "s3", region)
    request = _request(seen, fields["SignedHeaders"], seen.query)
    _check(auth, request, stamp, fields["SignedHeaders"], fields["Signature"])
    chain = Chain(auth, request, fields["Signature"]) if payload == STREAMING_SIGNED else None
    return Signed(key_id, keys[key_id][1], payload, chain)


def _presigned(seen: Seen, query: Mapping[str, str], keys: AccessKeys, now: float) -> Signed:
    needed = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
              "X-Amz-SignedHeaders", "X-Amz-Signature")
    if any(name not in query for name in needed) or query["X-Amz-Algorithm"] != ALGORITHM:
        raise S3Error("AuthorizationQueryParametersError", "a presigned URL needs "
                      + ", ".join(needed) + f" (algorithm {ALGORITHM})")
    if "authorization" in seen.headers:
        raise S3Error("InvalidArgument", "only one auth mechanism allowed: a presigned URL "
                      "or an Authorization header")
    key_id, date, region, secret = _credential(query["X-Amz-Credential"], keys)
    stamp = query["X-Amz-Date"]
    when = _stamp(stamp)
    expires_text = query["X-Amz-Expires"]
    if (expires_text.startswith("-") and expires_text[1:].isdigit()) or \
            (expires_text.isdigit() and int(expires_text) == 0):
        # a URL presigned to expire before it was made, or as it was: expired, as S3
        # answers it
        raise S3Error("AccessDenied", "Request has expired")
    if not expires_text.isdigit() or not 0 < int(expires_text) <= MAX_EXPIRES:
        raise S3Error("AuthorizationQueryParametersError",
                      f"X-Amz-Expires must be 1 to {MAX_EXPIRES} seconds")
    if date != stamp[:8]:
        raise S3Error("AuthorizationQueryParametersError",
                      "the credential's date is not the date of X-Amz-Date")
    if when - now > CLOCK_SKEW:
        raise S3Error("RequestTimeTooSkewed", "the presigned URL is dated in the future")
    if not now <= when + int(expires_text):
        raise S3Error("AccessDenied", "Request has expired")
    unsigned = [(name, value) for name, value in seen.query if name != "X-Amz-Signature"]
    auth = S3SigV4QueryAuth(Credentials(key_id, secret), "s3", region,
                            expires=int(expires_text))
    _check(auth, _request(seen, query["X-Amz-SignedHeaders"], unsigned), stamp,
           query["X-Amz-SignedHeaders"], query["X-Amz-Signature"])
    return Signed(key_id, keys[key_id][1], UNSIGNED_PAYLOAD)
