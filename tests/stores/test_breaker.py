"""The circuit breaker of a remote store, against real stopped and restarted peers.

After ``breaker_failures`` operations in a row got no answer (the peer is SIGKILLed), the
next operations fail at once without asking the store (their error says so); once the
cool-down has passed (a test clock), the next operation probes the store: a store that is
back closes the breaker, and the count starts again from zero.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest

from blobledger.errors import ConfigError, StoreUnavailable
from blobledger.stores.azure import AzureStore
from blobledger.stores.base import Store
from blobledger.stores.limits import StoreLimits
from blobledger.stores.resilience import Breaker
from tests.support.services import Azurite, start_azurite, start_moto, wait_for_port

NOT_ASKED = "not asked again"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def restart(azurite: Azurite) -> None:
    """The same Azurite (port and files) started again after a kill."""
    azurite.process = subprocess.Popen(
        [*azurite.process.args[:2], "--blobHost", "127.0.0.1", "--blobPort",  # type: ignore[index]
         str(azurite.port), "--location", str(azurite.location), "--skipApiVersionCheck",
         "--disableTelemetry", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(azurite.port)


async def unreachable(store: Store) -> str:
    with pytest.raises(StoreUnavailable) as caught:
        await store.ping()
    return str(caught.value)


async def test_a_dead_azure_store_fails_fast_then_a_probe_closes_the_breaker() -> None:
    azurite = start_azurite()
    clock = Clock()
    limits = StoreLimits(retries=0, breaker_failures=3, breaker_cooldown=5)
    store = AzureStore(f"c{uuid.uuid4().hex[:12]}", connection_string=azurite.connection_string,
                       limits=limits)
    store.breaker = Breaker(store.url, 3, 5.0, clock=clock)
    try:
        await store.prepare()
        azurite.process.kill()
        azurite.process.wait()
        for _ in range(3):
            assert NOT_ASKED not in await unreachable(store)
        assert store.breaker.is_open
        restart(azurite)  # back, but the breaker does not ask it before the cool-down ends
        assert NOT_ASKED in await unreachable(store)
        assert NOT_ASKED in await unreachable(store)
        clock.now += 5.0  # half-open: the next operation probes the store
        await store.prepare()  # (a killed Azurite may forget its containers)
        assert not store.breaker.is_open
        azurite.process.kill()
        azurite.process.wait()
        # the probe's answer reset the count: two more failures do not open it
        for _ in range(2):
            assert NOT_ASKED not in await unreachable(store)
        assert not store.breaker.is_open
    finally:
        await store.close()
        azurite.stop()


async def test_a_failed_probe_opens_the_breaker_again() -> None:
    moto = start_moto()
    clock = Clock()
    store = moto.store(limits=StoreLimits(retries=0))
    store.breaker = Breaker(store.url, 2, 5.0, clock=clock)
    try:
        await store.prepare()
        moto.process.kill()
        moto.process.wait()
        for _ in range(2):
            assert NOT_ASKED not in await unreachable(store)
        assert NOT_ASKED in await unreachable(store)
        clock.now += 5.0
        assert NOT_ASKED not in await unreachable(store)  # the probe asks, and fails
        assert NOT_ASKED in await unreachable(store)  # open again for a cool-down
    finally:
        await store.close()
        moto.stop()


def test_the_limits_are_settings_of_each_backend() -> None:
    from blobledger.config import load_settings

    settings = load_settings({"BLOBLEDGER_AZURE_CONNECT_TIMEOUT": "0.5",
                              "BLOBLEDGER_AZURE_RETRIES": "0",
                              "BLOBLEDGER_S3_BREAKER_COOLDOWN": "60",
                              "BLOBLEDGER_S3_PROBE_TIMEOUT": "1.5"}, env_file=None)
    assert settings.azure.connect_timeout == 0.5
    assert settings.azure.retries == 0
    assert settings.s3.breaker_cooldown == 60.0
    assert settings.s3.probe_timeout == 1.5
    assert settings.s3.retries == StoreLimits().retries
    with pytest.raises(ConfigError, match="BLOBLEDGER_S3_RETRIES"):
        load_settings({"BLOBLEDGER_S3_RETRIES": "-1"}, env_file=None)
