"""The Azure store's single put and retag sent as requests of their own
(stores/azure/lean.py), on Azurite through the fault proxy, which sees every request as
the service does: the conditions they carry, the credentials they are signed with, a SAS
they run under, the retries, and every answer translated as the SDK's own error for the
same answer is. While anybody watches the SDK's requests, or the store was given SDK
options, the SDK sends them."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import ContainerSasPermissions, generate_container_sas
from azure.storage.blob.aio import BlobClient, BlobServiceClient

from blobledger.errors import (
    AccessRefused,
    BlobAlreadyExists,
    BlobLedgerError,
    BlobNotFound,
    ConditionNotMet,
    StoreMissing,
)
from blobledger.stores.azure import AzureStore, lean
from tests.conftest import new_container
from tests.stores.contract import PENDING, new_name, put, stream
from tests.support.faultproxy import FaultProxy, Request
from tests.support.services import (
    ACCOUNT,
    KEY,
    Azurite,
    azurite_main,
    connection_string,
    free_port,
    terminate,
    wait_for_port,
)

ROOT = Path(__file__).resolve().parents[2]

COMMITTED = {"state": "committed"}
#: one retry, and the timeouts: options the request of its own keeps
OPTIONS = {"retry_total": 1, "connection_timeout": 2, "read_timeout": 2}


#: a Set Blob Tags request (what every fault here is injected into)
tag_write = attrgetter("is_tag_write")


@pytest.fixture
def proxy(azurite: Azurite) -> Iterator[FaultProxy]:
    with FaultProxy(azurite.port) as running:
        yield running


@pytest.fixture
def seen(proxy: FaultProxy) -> list[Request]:
    """Every tag write the proxy forwards or answers."""
    return proxy.record(tag_write)


@pytest.fixture
def no_sdk_retag(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's Set Blob Tags and Put Blob fail the test if called."""

    async def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the SDK sent the request")

    monkeypatch.setattr(BlobClient, "set_blob_tags", refused)
    monkeypatch.setattr(BlobClient, "upload_blob", refused)


@pytest.fixture
async def store(proxy: FaultProxy) -> AsyncIterator[AzureStore]:
    store = AzureStore(new_container(), connection_string=connection_string(proxy.port),
                       client_options=dict(OPTIONS))
    await store.prepare()
    async with store:
        yield store


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_retag_is_a_request_of_its_own_that_carries_its_condition(
        store: AzureStore, seen: list[Request]) -> None:
    """The condition goes as ``x-ms-if-tags`` (the real service's only guard: Azurite
    ignores it, so the proxy is what checks it), an unconditioned retag sends none, and the
    tags are written (read back through the SDK)."""
    name = new_name()
    await put(store, name, b"tagged by a request of its own", state="pending")
    await store.set_tags(name, COMMITTED, if_tags=PENDING)
    assert await store.get_tags(name) == COMMITTED
    await store.set_tags(name, {"state": "deleting", "kind": "a b+c-d.e/f:g=h_i"})
    assert await store.get_tags(name) == {"state": "deleting", "kind": "a b+c-d.e/f:g=h_i"}
    assert [r.header("x-ms-if-tags") for r in seen] == ["\"state\" = 'pending'", None]
    assert all((r.header("authorization") or "").startswith(f"SharedKey {ACCOUNT}:")
               for r in seen)
    assert store._kept == {}  # the put's client given up with its retag


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_retag_under_a_sas_the_connection_string_carries(
        azurite: Azurite, proxy: FaultProxy, seen: list[Request]) -> None:
    """A SAS connection string: the request runs under the SAS in its URL (no signature of
    its own), and one whose SAS may not write tags is refused as the SDK's would be."""
    container = new_container()
    async with AzureStore(container, connection_string=connection_string(proxy.port)) as keyed:
        await keyed.prepare()
        name = new_name()
        await put(keyed, name, b"retagged under a SAS", state="pending")
    expiry = datetime.now(UTC) + timedelta(hours=1)
    for permission, refused in ((ContainerSasPermissions(read=True, tag=True), False),
                                (ContainerSasPermissions(read=True, write=True), True)):
        sas = generate_container_sas(ACCOUNT, container, account_key=KEY, expiry=expiry,
                                     permission=permission)
        endpoint = f"BlobEndpoint=http://127.0.0.1:{proxy.port}/{ACCOUNT};"
        async with AzureStore(container, connection_string=f"{endpoint}SharedAccessSignature={sas}"
                              ) as store:
            if refused:
                with pytest.raises(AccessRefused):
                    await store.set_tags(name, {"state": "deleting"})
            else:
                await store.set_tags(name, COMMITTED, if_tags=PENDING)
    assert [("sig=" in r.target, r.header("authorization")) for r in seen] == [(True, None)] * 2
    async with AzureStore(container, connection_string=connection_string(azurite.port)) as read:
        assert await read.get_tags(name) == COMMITTED


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_retag_the_service_answers_5xx_is_retried_as_the_sdk_retries(
        store: AzureStore, proxy: FaultProxy) -> None:
    """503 then 2xx: retried once (``retry_total``) and done; 503 twice: StoreUnavailable
    after the one retry; a 501 (not retried by the SDK either) at once."""
    from blobledger.errors import StoreUnavailable

    name = new_name()
    await put(store, name, b"retried", state="pending")
    proxy.add(tag_write, "status:503", times=1)
    await store.set_tags(name, COMMITTED, if_tags=PENDING)
    assert (proxy.injected["status"], await store.get_tags(name)) == (1, COMMITTED)
    proxy.add(tag_write, "status:503", times=2)
    with pytest.raises(StoreUnavailable):
        await store.set_tags(name, {"state": "deleting"})
    assert proxy.injected["status"] == 3
    proxy.add(tag_write, "status:501", times=2)
    with pytest.raises(BlobLedgerError):
        await store.set_tags(name, {"state": "deleting"})
    assert proxy.injected["status"] == 4


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_lost_answer_and_a_hung_one_are_retried(
        store: AzureStore, proxy: FaultProxy) -> None:
    """The retag applied and its answer lost, then one that never answers (the read
    timeout): each retried, the tags written."""
    name = new_name()
    await put(store, name, b"lost", state="pending")
    proxy.add(tag_write, "lost_response", times=1)
    await store.set_tags(name, COMMITTED)
    proxy.add(tag_write, "hang", times=1)
    await store.set_tags(name, {"state": "deleting"})
    assert (proxy.injected["lost_response"], proxy.injected["hang"]) == (1, 1)
    assert await store.get_tags(name) == {"state": "deleting"}


ANSWERS = [400, 403, 404, 409, 412, 429, 501, 401]


async def _error_of(store: AzureStore, name: str, proxy: FaultProxy, status: int) -> type:
    proxy.add(tag_write, f"status:{status}", times=1)
    with pytest.raises(BlobLedgerError) as raised:
        await store.set_tags(name, COMMITTED, if_tags=PENDING)
    return type(raised.value)


async def test_every_answer_is_the_error_the_sdk_would_raise(
        store: AzureStore, proxy: FaultProxy, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each refusal injected in front of Azurite, sent by the request of its own and then by
    the SDK (its HTTP log enabled, which hands the retag to it): the same blobledger error;
    and the real answers: a missing blob, a missing container, a wrong key."""
    name = new_name()
    await put(store, name, b"answers", state="pending")
    sent: list[str] = []
    original = lean.LeanRequests.set_blob_tags

    async def counted(self: lean.LeanRequests, *args: Any, **kwargs: Any) -> None:
        sent.append("own")
        await original(self, *args, **kwargs)

    monkeypatch.setattr(lean.LeanRequests, "set_blob_tags", counted)
    own = [await _error_of(store, name, proxy, status) for status in ANSWERS]
    assert sent == ["own"] * len(ANSWERS)
    caplog.set_level(logging.INFO, logger=lean.HTTP_LOG.name)
    by_sdk = [await _error_of(store, name, proxy, status) for status in ANSWERS]
    assert sent == ["own"] * len(ANSWERS)  # the SDK sent these
    assert own == by_sdk
    assert own[1:5] == [AccessRefused, BlobNotFound, BlobAlreadyExists, ConditionNotMet]
    caplog.set_level(logging.WARNING, logger=lean.HTTP_LOG.name)
    with pytest.raises(BlobNotFound):
        await store.set_tags(new_name(), COMMITTED)
    wrong = connection_string(proxy.port).replace(KEY, KEY[:-8] + "AAAAAAA=")
    async with AzureStore(store.container_name, connection_string=wrong) as refused:
        with pytest.raises(AccessRefused):
            await refused.set_tags(name, COMMITTED)
    async with AzureStore(new_container(), connection_string=connection_string(proxy.port)
                          ) as missing:
        with pytest.raises(StoreMissing):
            await missing.set_tags(name, COMMITTED)
    assert len(sent) == len(ANSWERS) + 3


async def test_the_sdk_sends_it_when_given_options_of_its_own(proxy: FaultProxy) -> None:
    """A store built with SDK options beyond the timeouts and retries (here a request hook)
    has the SDK send its retags: the options apply to every request the SDK sends."""
    hooked: list[str] = []

    def hook(request: Any) -> None:
        hooked.append(request.http_request.method)

    async with AzureStore(new_container(), connection_string=connection_string(proxy.port),
                          client_options={"raw_request_hook": hook}) as store:
        await store.prepare()
        name = new_name()
        await put(store, name, b"hooked", state="pending")
        before = len(hooked)
        await store.set_tags(name, COMMITTED, if_tags=PENDING)
        assert hooked[before:] == ["GET", "PUT"]  # the emulator: the tags read first
        assert isinstance(store, AzureStore)
        assert store._lean_requests(name) is None


def blob_put(request: Request) -> bool:
    return request.method == "PUT" and request.comp is None


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_put_is_a_request_of_its_own_as_the_sdk_sends_it(
        azurite: Azurite, store: AzureStore, proxy: FaultProxy) -> None:
    """The single put carries ``If-None-Match: *``, its tags, its digests as metadata, its
    content type and MD5, signed with the account key: the blob reads back with all of them
    (through the SDK, on Azurite directly), and a second put of the name is refused and
    leaves the first bytes."""
    puts = proxy.record(blob_put)
    name = new_name()
    first = await store.put(name, stream(b"the first bytes"), tags=PENDING,
                            content_type="text/plain")
    with pytest.raises(BlobAlreadyExists):
        await put(store, name, b"other bytes", state="pending")
    assert [r.header("if-none-match") for r in puts] == ["*", "*"]
    assert all((r.header("authorization") or "").startswith(f"SharedKey {ACCOUNT}:")
               for r in puts)
    client = BlobServiceClient.from_connection_string(connection_string(azurite.port))
    async with client:
        blob = client.get_blob_client(store.container_name, name)
        props = await blob.get_blob_properties()
        assert await (await blob.download_blob()).readall() == b"the first bytes"
        assert await blob.get_blob_tags() == {"state": "pending"}
    assert props.metadata == {"sha256": first.sha256, "md5": first.md5}
    assert props.content_settings.content_type == "text/plain"
    assert bytes(props.content_settings.content_md5 or b"").hex() == first.md5
    assert props.blob_type == "BlockBlob"


@pytest.mark.usefixtures("no_sdk_retag")
async def test_a_put_whose_answer_is_lost_is_retried_and_found_its_own(
        store: AzureStore, proxy: FaultProxy) -> None:
    """A put applied whose answer was lost: the retry is refused as existing and the store
    says so with the digests to compare (what the SDK's retry gives); a 503 is retried."""
    name = new_name()
    proxy.add(blob_put, "lost_response", times=1)
    with pytest.raises(BlobAlreadyExists) as raised:
        await put(store, name, b"applied, answer lost", state="pending")
    assert raised.value.computed is not None
    proxy.add(blob_put, "status:503", times=1)
    await put(store, new_name(), b"retried once", state="pending")
    assert (proxy.injected["lost_response"], proxy.injected["status"]) == (1, 1)


@pytest.fixture(scope="module")
def oauth_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An Azurite that takes bearer tokens (``--oauth basic``, which needs HTTPS): its
    account URL and its certificate (self-signed, for 127.0.0.1)."""
    folder = tmp_path_factory.mktemp("oauth")
    cert, key = folder / "cert.pem", folder / "key.pem"
    self_signed(cert, key)
    port = free_port()
    process = subprocess.Popen(
        ["node", str(azurite_main()), "--blobHost", "127.0.0.1", "--blobPort", str(port),
         "--location", str(folder / "data"), "--skipApiVersionCheck", "--disableTelemetry",
         "--silent", "--oauth", "basic", "--cert", str(cert), "--key", str(key)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port(port)
        yield f"https://127.0.0.1:{port}/{ACCOUNT}", cert
    finally:
        terminate(process, 10)


def self_signed(cert: Path, key: Path) -> None:
    """A certificate and key for 127.0.0.1, valid for a day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(private.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM,
                                          serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))


def test_a_token_signs_the_stores_own_requests(
        oauth_azurite: tuple[str, Path]) -> None:
    """With a token credential (Entra ID's kind; Azurite's OAuth over HTTPS), the put and
    the retag go as the store's own requests, signed by the client's bearer-token policy;
    a token the service refuses is AccessRefused, as through the SDK. In a child process:
    the certificate is trusted through ``SSL_CERT_FILE``, read at the first TLS
    connection."""
    url, cert = oauth_azurite
    done = subprocess.run(
        [sys.executable, "-m", "tests.stores.oauth_child", url], capture_output=True,
        text=True, timeout=120, check=False, cwd=ROOT,
        env={**os.environ, "SSL_CERT_FILE": str(cert)})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["tags"] == {"state": "committed"}
    assert result["signed in"] == ["own put 201", "own tags 204"]
    # Azurite answers a refused token 403 (the real service 401 with a challenge: below)
    assert result["refused sent"] == ["own put 403"]
    assert result["refused"] == "AccessRefused"


class ChallengedToken:
    """A token credential's policy as the store's own requests use it (an ``on_request`` to
    await): no token service runs here, and Azurite never challenges (it answers 403)."""

    async def on_request(self, request: Any) -> None:
        request.http_request.headers["Authorization"] = "Bearer a-token-to-challenge"


async def test_a_challenged_token_leaves_the_request_to_the_sdk(
        store: AzureStore, proxy: FaultProxy) -> None:
    """The service's challenge (401) to a token on the store's own put or retag: the
    request is reported not sent and the store makes the SDK's call (whose policy answers
    challenges; here the account key signs it), once, without a retry of its own."""
    store._client()
    assert store._lean is not None
    store._lean._policy, store._lean._bearer = ChallengedToken(), True
    puts, tags = proxy.record(blob_put), proxy.record(tag_write)
    proxy.add(blob_put, "status:401", times=1)
    proxy.add(tag_write, "status:401", times=1)
    name = new_name()
    await put(store, name, b"challenged, then sent by the SDK", state="pending")
    await store.set_tags(name, COMMITTED)
    assert await store.get_tags(name) == COMMITTED
    assert [r.header("authorization") for r in puts] == [
        "Bearer a-token-to-challenge", puts[1].header("authorization")]
    assert (puts[1].header("authorization") or "").startswith("SharedKey ")
    assert len(tags) == 2 and (tags[1].header("authorization") or "").startswith("SharedKey ")
    assert proxy.injected["status"] == 2


@pytest.mark.parametrize(("level", "watched"), [("INFO", False), ("DEBUG", True)])
def test_the_sdks_request_log_shows_at_debug_only(level: str, watched: bool) -> None:
    """``--log-level INFO`` is blobledger's own events: the SDK's request log (several lines
    for every request) stays quiet, and the store's own requests are sent; at ``DEBUG`` the
    SDK's log shows every request, and so the SDK sends them all."""
    from blobledger._base.logs import setup_logging

    root = logging.getLogger()
    kept = (list(root.handlers), root.level, lean.HTTP_LOG.level)
    try:
        setup_logging(level)
        assert lean.HTTP_LOG.isEnabledFor(logging.INFO) is watched
        assert lean.observed() is watched
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in kept[0]:
            root.addHandler(handler)
        root.setLevel(kept[1])
        lean.HTTP_LOG.setLevel(kept[2])
