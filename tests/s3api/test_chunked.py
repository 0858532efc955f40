"""``aws-chunked`` bodies: the chunk signatures against AWS's own worked example
(``sigv4-streaming.html``: the seed, both chunks and the last), and bodies encoded as SDKs
encode them, signed chunks and botocore's unsigned chunks with a checksum trailer, sent to
a real ``serve``: accepted when every chunk holds, refused with nothing visible otherwise."""

from __future__ import annotations

import hashlib
import io
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum

from blobledger.s3api.sigv4 import STREAMING_SIGNED, Seen, verify
from tests.s3api.conftest import BUCKET, WRITER, on
from tests.support.server import Server

# AWS's example: https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html
EXAMPLE_KEY = ("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
EXAMPLE_HEADERS = {
    "host": "s3.amazonaws.com", "x-amz-date": "20130524T000000Z",
    "x-amz-storage-class": "REDUCED_REDUNDANCY", "content-encoding": "aws-chunked",
    "content-length": "66824", "x-amz-decoded-content-length": "66560",
    "x-amz-content-sha256": STREAMING_SIGNED}
EXAMPLE_SIGNED = ("content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
                  "x-amz-decoded-content-length;x-amz-storage-class")
EXAMPLE_SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
EXAMPLE_CHUNKS = [
    (65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"),
    (1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"),
    (0, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9")]


def test_the_chunk_signatures_of_aws_worked_example() -> None:
    authorization = (f"AWS4-HMAC-SHA256 Credential={EXAMPLE_KEY[0]}/20130524/us-east-1/s3/"
                     f"aws4_request,SignedHeaders={EXAMPLE_SIGNED},Signature={EXAMPLE_SEED}")
    seen = Seen("PUT", "s3.amazonaws.com", "/examplebucket/chunkObject.txt", [],
                {**EXAMPLE_HEADERS, "authorization": authorization})
    now = datetime(2013, 5, 24, tzinfo=UTC).timestamp()
    signed = verify(seen, {EXAMPLE_KEY[0]: (EXAMPLE_KEY[1], frozenset({"write"}))}, now)
    assert signed.chain is not None and signed.chain.seed == EXAMPLE_SEED
    previous = EXAMPLE_SEED
    for size, expected in EXAMPLE_CHUNKS:
        previous = signed.chain.chunk_signature(previous,
                                                hashlib.sha256(b"a" * size).hexdigest())
        assert previous == expected


def signed(request: AWSRequest) -> tuple[S3SigV4Auth, dict[str, str], str]:
    """``request`` signed in its headers with the writer's key as botocore signs it, dated
    now: the signer, the headers to send and the signature (a chunked body's seed)."""
    auth = S3SigV4Auth(Credentials(*WRITER), "s3", "us-east-1")
    request.context["timestamp"] = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    request.headers["X-Amz-Date"] = request.context["timestamp"]
    signature = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)),
                               request)
    headers = dict(request.headers.items())
    headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={WRITER[0]}/{auth.credential_scope(request)}, "
        f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}, "
        f"Signature={signature}")
    return auth, headers, signature


def signed_chunks(url: str, body: bytes, chunk: int, tamper: bool = False
                  ) -> tuple[dict[str, str], bytes]:
    """The headers and the ``aws-chunked`` body of a PUT whose chunks are each signed, as
    the Java and Go SDKs send them: the seed by botocore's signer, each chunk's signature
    by its primitives (``tamper``: the second chunk's bytes changed after signing)."""
    pieces = [body[i:i + chunk] for i in range(0, len(body), chunk)] + [b""]
    # Content-Length left unsigned (httpx sends it): a test may cut the body after signing
    request = AWSRequest(method="PUT", url=url, headers={
        "Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": str(len(body)),
        "X-Amz-Content-SHA256": STREAMING_SIGNED})
    auth, headers, seed = signed(request)
    out, previous = io.BytesIO(), seed
    for index, piece in enumerate(pieces):
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", request.context["timestamp"],
                             auth.credential_scope(request), previous,
                             hashlib.sha256(b"").hexdigest(),
                             hashlib.sha256(piece).hexdigest()])
        previous = auth.signature(to_sign, request)
        sent = piece[:-1] + b"!" if tamper and index == 1 else piece
        out.write(f"{len(piece):x};chunk-signature={previous}\r\n".encode() + sent + b"\r\n")
    return headers, out.getvalue()


def _url(server: Server, key: str) -> str:
    return f"{server.url}/s3/{BUCKET}/{key}"


# the chunks are decoded and checked as the body streams in, whatever the store: one server
@on("postgresql-azure")
def test_signed_chunks_are_accepted_and_read_back(s3_server: Server, s3: Any,
                                                  prefix: str) -> None:
    body = bytes(range(256)) * 300  # 76,800 bytes in chunks of 8 KiB and a short one
    headers, encoded = signed_chunks(_url(s3_server, prefix + "signed"), body, 8192)
    sent = httpx.put(_url(s3_server, prefix + "signed"), content=encoded, headers=headers)
    assert sent.status_code == 200, sent.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "signed")["Body"].read() == body


@pytest.mark.parametrize("why", ["tampered", "truncated", "unsigned"])
@on("postgresql-azure")
def test_a_chunk_that_does_not_hold_leaves_nothing(s3_server: Server, s3: Any, prefix: str,
                                                   why: str) -> None:
    url = _url(s3_server, prefix + why)
    headers, encoded = signed_chunks(url, b"z" * 20000, 8192, tamper=why == "tampered")
    if why == "truncated":  # the last chunk and its signature never come
        encoded = encoded[:encoded.rindex(b"0;chunk-signature=")]
    if why == "unsigned":  # a chunk's signature left out
        encoded = encoded.replace(encoded[encoded.index(b";"):encoded.index(b"\r\n")], b"", 1)
    sent = httpx.put(url, content=encoded, headers=headers)
    code = "SignatureDoesNotMatch" if why == "tampered" else "IncompleteBody"
    assert f"<Code>{code}</Code>" in sent.text, sent.text
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)


def trailer_put(url: str, body: bytes, crc: str | None = None) -> httpx.Response:
    """A PUT as botocore sends one over HTTPS: ``STREAMING-UNSIGNED-PAYLOAD-TRAILER``, its
    chunks and its CRC32 trailer by botocore's own ``AwsChunkedWrapper`` (``crc``: another
    trailer value)."""
    wrapped = AwsChunkedWrapper(io.BytesIO(body), checksum_cls=Crc32Checksum,
                                checksum_name="x-amz-checksum-crc32", chunk_size=16384)
    encoded = wrapped.read()
    if crc is not None:
        head, _, _ = encoded.rpartition(b"x-amz-checksum-crc32:")
        encoded = head + f"x-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    request = AWSRequest(method="PUT", url=url, headers={
        "Content-Encoding": "aws-chunked", "X-Amz-Trailer": "x-amz-checksum-crc32",
        "X-Amz-Decoded-Content-Length": str(len(body)),
        "X-Amz-Content-SHA256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
    request.context["payload_signing_enabled"] = False
    _, headers, _ = signed(request)
    with httpx.Client() as http:  # a generator body: Transfer-Encoding: chunked, as botocore
        return http.put(url, content=iter([encoded]), headers=headers)


@on("postgresql-azure")
def test_an_unsigned_trailer_checksum_is_checked(s3_server: Server, s3: Any,
                                                 prefix: str) -> None:
    body = b"trailer " * 5000
    sent = trailer_put(_url(s3_server, prefix + "trailer"), body)
    assert sent.status_code == 200, sent.text
    assert s3.get_object(Bucket=BUCKET, Key=prefix + "trailer")["Body"].read() == body
    wrong = trailer_put(_url(s3_server, prefix + "wrong"), body, crc="AAAAAA==")
    assert wrong.status_code == 400 and "<Code>BadDigest</Code>" in wrong.text, wrong.text
    assert [c["Key"] for c in s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)[
        "Contents"]] == [prefix + "trailer"]
