"""The soak: several ``blobledger serve`` processes and two ``blobledger sweep`` loops on
PostgreSQL + Azurite (or moto's S3 server), storage reached through the fault proxy, a
client doing creates, replaces, deletes and reads, and service processes SIGKILLed (and
restarted) at random.

The client remembers the SHA-256 of every acknowledged write. An unacknowledged write (the
process died, the answer was lost) is remembered as *possible*; a later read or a refused
precondition settles which one happened. At the end, with faults off and the clock moved
past every cutoff (``BLOBLEDGER_CLOCK_OFFSET``) for a final sweep: every document reads
back byte-identical to what was acknowledged (or to a possible write), deleted documents
stay gone, the invariant checker is clean (settled), and the container holds exactly the
blobs of ready documents.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from blobledger.config import Settings
from blobledger.db import Database
from blobledger.protocol.ledger import Ledger
from blobledger.stores.azure import AzureStore
from blobledger.stores.base import Store
from blobledger.workers.invariants import check
from tests.support.faultproxy import FaultProxy
from tests.support.server import blobledger_command, wait_until_ready
from tests.support.services import Azurite, MotoS3, connection_string, free_port

FAULTS = ("status:503", "status:500", "reset_request", "reset_response", "slow:0.3",
          "lost_response")
UPLOAD_DEADLINE = 10  # seconds: an intent a killed process left is leased this long
SWEEP_AFTER = 75  # the least the configuration allows for that deadline, plus a margin
DELETE_GRACE = 1
FINAL_OFFSET = SWEEP_AFTER + 600  # the final sweep's clock: past every cutoff


@dataclass
class Storage:
    """Where the soak's blobs live: the real server's port (the fault proxy's upstream), the
    environment that points a process at it through the proxy, and the store, direct."""

    kind: str
    port: int
    url: str
    env_through: Callable[[int], dict[str, str]]
    direct: Callable[[], Store]


def azure_storage(azurite: Azurite) -> Storage:
    container = f"soak{uuid.uuid4().hex[:16]}"
    return Storage(
        "azure", azurite.port, f"azure://{container}",
        lambda port: {"BLOBLEDGER_AZURE_CONNECTION_STRING": connection_string(port)},
        lambda: AzureStore(container, connection_string=azurite.connection_string))


def s3_storage(moto: MotoS3) -> Storage:
    bucket = f"soak{uuid.uuid4().hex[:16]}"

    def through(port: int) -> dict[str, str]:
        return {**moto.environment(), "BLOBLEDGER_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}"}

    def direct() -> Store:
        store = moto.store()
        store.bucket, store.url = bucket, f"s3://{bucket}"
        return store

    return Storage("s3", moto.port, f"s3://{bucket}", through, direct)


@dataclass
class Doc:
    id: str
    name: str
    version: int
    sha: str
    possible: set[str] = field(default_factory=set)  # unacknowledged replaces since
    maybe_deleted: bool = False
    deleted: bool = False
    busy: bool = False


@dataclass
class Totals:
    operations: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # 408s: the deadline passed
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    documents: int = 0
    verified: int = 0
    traces: list[str] = field(default_factory=list)  # the logs' lines on a violation's blob

    def render(self) -> str:
        ops = sum(self.operations.values())
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.operations.items()))
        return "\n".join([
            f"operations: {ops} ({kinds})",
            f"failed or unanswered requests: {_counts(self.failures)}",
            f"service processes killed: {self.kills}",
            f"writes refused past their deadline (408, nothing written): "
            f"{_counts(self.refused)}",
            f"storage faults injected: {_counts(self.faults)}",
            f"documents at the end: {self.documents} (verified byte for byte: {self.verified})",
            f"violations: {len(self.violations)}",
            *[f"  {v}" for v in self.violations[:50]],
            *([f"the processes' log lines naming those blobs ({len(self.traces)}):"]
              if self.traces else []),
            *[f"  {t}" for t in self.traces[:80]],
        ])


def _counts(counter: Counter[str]) -> str:
    """``7 (a 3, b 4)``: the total, then each kind's count."""
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "none"
    return f"{sum(counter.values())} ({kinds})"


class Services:
    """The serve and sweep processes, their environment and their logs."""

    def __init__(self, folder: Path, database_url: str, storage: Storage, proxy_port: int,
                 servers: int) -> None:
        self.folder = folder
        self.kind = storage.kind
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("BLOBLEDGER_")}
        self.env.update(
            BLOBLEDGER_DATABASE_URL=database_url,
            BLOBLEDGER_STORE_URL=storage.url,
            **storage.env_through(proxy_port),
            BLOBLEDGER_UPLOAD_DEADLINE=f"{UPLOAD_DEADLINE}s",
            BLOBLEDGER_SWEEP_AFTER=f"{SWEEP_AFTER}s",
            BLOBLEDGER_DELETE_GRACE=f"{DELETE_GRACE}s",
        )
        self.ports = [free_port() for _ in range(servers)]
        self.servers: dict[int, subprocess.Popen[bytes]] = {}
        self.sweepers: list[subprocess.Popen[bytes]] = []

    def _spawn(self, args: list[str], log: str, **extra: str) -> subprocess.Popen[bytes]:
        with (self.folder / log).open("ab") as out:
            return subprocess.Popen(blobledger_command(*args), env={**self.env, **extra},
                                    cwd=self.folder, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def traces(self, violations: list[str]) -> list[str]:
        """Every log line (serve, sweep, final sweep) naming a blob a violation names, or
        each failed final sweep's last lines: what the processes did with it."""
        names = set(re.findall(r"[\w-]+/[0-9a-f]{32}[\w.]*", "\n".join(violations)))
        failed = any(v.startswith("final sweep") for v in violations)
        lines = []
        for log in sorted(self.folder.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()
            if failed and log.name == "final-sweep.log":
                lines += [f"{log.name}: {line}" for line in text[-20:]]
            lines += [f"{log.name}: {line}" for line in text
                      if any(name in line for name in names)]
        return lines

    def url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"

    def start_server(self, port: int) -> None:
        process = self._spawn(["serve", "--port", str(port), "--body-timeout", "5"],
                              f"serve-{port}.log")
        self.servers[port] = process
        wait_until_ready(self.url(port), process, self.folder / f"serve-{port}.log")

    def kill_server(self, port: int) -> None:
        process = self.servers.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def start_sweepers(self, count: int) -> None:
        for n in range(count):
            self.sweepers.append(self._spawn(["sweep", "--interval", "1s", "--batch", "50"],
                                             f"sweep-{n}.log"))

    def sweep_once(self, offset: float) -> int:
        # The final sweeps are the harness's, not under test: a store slow to answer on a
        # loaded machine must not end them at the start-up check (a 2 s probe by default).
        process = self._spawn(["sweep", "--once"], "final-sweep.log",
                              BLOBLEDGER_CLOCK_OFFSET=str(offset), **{
                                  f"BLOBLEDGER_{self.kind.upper()}_PROBE_TIMEOUT": "30"})
        return process.wait(120)

    def stop(self) -> None:
        for process in [*self.servers.values(), *self.sweepers]:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.servers.values(), *self.sweepers]:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self.servers.clear()
        self.sweepers.clear()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Client:
    """Random operations against random servers; what was acknowledged, what was possible."""

    def __init__(self, services: Services, totals: Totals, seed: int) -> None:
        self.services = services
        self.totals = totals
        self.random = random.Random(seed)
        self.docs: list[Doc] = []
        self.unacknowledged_creates: dict[str, str] = {}  # name -> sha of the attempt
        self.refused_creates: set[str] = set()  # names answered 408: never to appear
        self.http = httpx.AsyncClient(timeout=30)

    def _server(self) -> str:
        ports = list(self.services.servers) or self.services.ports
        return self.services.url(self.random.choice(ports))

    def _body(self) -> bytes:
        return os.urandom(self.random.choice([100, 2_000, 40_000, 200_000]))

    def _violation(self, text: str) -> None:
        self.totals.violations.append(text)

    def _refused(self, kind: str, response: httpx.Response) -> bool:
        """A 408 upload-aborted: the write ran past its deadline (a slow or starved
        process); an answer that promises nothing was written, which verify holds it to."""
        if response.status_code != 408:
            return False
        if response.json().get("type") != "urn:blobledger:problem:upload-aborted":
            return False
        self.totals.refused[kind] += 1
        return True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            live = [d for d in self.docs if not d.deleted and not d.busy]
            roll = self.random.random()
            if not live or roll < 0.3:
                await self.create()
            else:
                doc = self.random.choice(live)
                doc.busy = True
                try:
                    if roll < 0.55:
                        await self.replace(doc)
                    elif roll < 0.62:
                        await self.delete(doc)
                    else:
                        await self.read(doc)
                finally:
                    doc.busy = False

    async def _request(self, kind: str, method: str, path: str, **kwargs: object
                       ) -> httpx.Response | None:
        self.totals.operations[kind] += 1
        try:
            response = await self.http.request(
                method, self._server() + path, **kwargs)  # type: ignore[arg-type]
        except httpx.HTTPError as exc:
            self.totals.failures[type(exc).__name__] += 1
            return None
        if response.status_code >= 500:
            self.totals.failures[f"HTTP {response.status_code}"] += 1
            return None
        return response

    async def create(self) -> None:
        name = f"soak/{uuid.uuid4().hex[:12]}.bin"
        body = self._body()
        response = await self._request("create", "POST", "/documents", params={"name": name},
                                       content=body,
                                       headers={"Content-Type": "application/octet-stream"})
        if response is not None and self._refused("create", response):
            self.refused_creates.add(name)
            return
        if response is None or response.status_code != 201:
            if response is not None:
                self._violation(f"create {name}: unexpected {response.status_code} "
                                f"{response.text[:200]}")
            self.unacknowledged_creates[name] = sha(body)
            return
        data = response.json()
        if data["sha256"] != sha(body):
            self._violation(f"create {name}: acknowledged SHA-256 differs from the bytes sent")
        self.docs.append(Doc(data["id"], name, data["version"], sha(body)))

    async def replace(self, doc: Doc) -> None:
        body = self._body()
        response = await self._request(
            "replace", "PUT", f"/documents/{doc.id}/content", content=body,
            headers={"If-Match": f'"{doc.version}"', "Content-Type": "application/octet-stream"})
        if response is None:
            doc.possible.add(sha(body))
            return
        if response.status_code == 200:
            data = response.json()
            if data["sha256"] != sha(body) or data["version"] <= doc.version:
                self._violation(f"replace {doc.id}: acknowledged {data} for other bytes")
            doc.version, doc.sha, doc.possible = data["version"], sha(body), set()
        elif response.status_code in (404, 412):
            await self.refresh(doc)
        elif not self._refused("replace", response):  # refused: its bytes are not possible
            self._violation(f"replace {doc.id}: unexpected {response.status_code}")

    async def delete(self, doc: Doc) -> None:
        response = await self._request("delete", "DELETE", f"/documents/{doc.id}",
                                        headers={"If-Match": f'"{doc.version}"'})
        if response is None:
            doc.maybe_deleted = True
        elif response.status_code == 204:
            doc.deleted = True
        elif response.status_code in (404, 412):
            await self.refresh(doc)
        else:
            self._violation(f"delete {doc.id}: unexpected {response.status_code}")

    async def refresh(self, doc: Doc) -> None:
        """A precondition failed: one of the possible writes happened; learn which."""
        response = await self._request("read", "GET", f"/documents/{doc.id}")
        if response is None:
            return
        self.settle(doc, response.status_code,
                    response.json().get("sha256") if response.status_code == 200 else None,
                    response.json().get("version") if response.status_code == 200 else None)

    def settle(self, doc: Doc, status: int, digest: str | None, version: int | None) -> None:
        if status == 404:
            if doc.maybe_deleted:
                doc.deleted = True
            else:
                self._violation(f"document {doc.id} ({doc.name}) vanished without a delete")
                doc.deleted = True
            return
        if status != 200 or digest is None:
            self._violation(f"document {doc.id}: unexpected {status}")
            return
        if digest == doc.sha and not doc.possible:
            doc.version = version or doc.version
            return
        if digest == doc.sha or digest in doc.possible:
            doc.sha, doc.version, doc.possible = digest, version or doc.version, set()
            return
        self._violation(f"document {doc.id} holds bytes never written (sha {digest[:12]})")

    async def read(self, doc: Doc) -> None:
        response = await self._request("read", "GET", f"/documents/{doc.id}/content")
        if response is None:
            return
        if response.status_code == 200:
            version = int(response.headers.get("ETag", '"0"').strip('"') or 0)
            self.settle(doc, 200, sha(response.content), version or None)
        else:
            self.settle(doc, response.status_code, None, None)

    async def close(self) -> None:
        await self.http.aclose()


async def killer(services: Services, totals: Totals, stop: asyncio.Event, seed: int,
                 interval: tuple[float, float]) -> None:
    """Every ``interval`` (counted from the last restart's readiness), SIGKILL a random
    serve process and start a new one on its port."""
    chooser = random.Random(seed)
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), chooser.uniform(*interval))
        if stop.is_set() or not services.servers:
            return
        port = chooser.choice(list(services.servers))
        services.kill_server(port)
        totals.kills += 1
        await asyncio.to_thread(services.start_server, port)


async def verify(client: Client, ledger: Ledger, totals: Totals) -> None:
    """Faults off, past every cutoff: every document as acknowledged (or possibly written),
    the invariants settled, the container exactly the blobs of ready documents."""
    known = {d.id: d for d in client.docs}
    ready = [d async for d in ledger.list()]
    totals.documents = len(ready)
    for found in ready:
        data = b"".join([chunk async for chunk in ledger.read(found.id)])
        digest = sha(data)
        if digest != found.sha256:
            client._violation(f"document {found.id}: bytes differ from its row")
        doc = known.get(found.id)
        if found.name in client.refused_creates:
            client._violation(f"document {found.id} ({found.name}): its create was refused "
                              "(408), yet it is ready")
        elif doc is None:
            if client.unacknowledged_creates.get(found.name) != digest:
                client._violation(f"document {found.id} ({found.name}) was never written")
        elif doc.deleted:
            client._violation(f"document {found.id}: acknowledged deleted, still readable")
        elif digest != doc.sha and digest not in doc.possible:
            client._violation(f"document {found.id}: bytes differ from every acknowledged "
                              "or possible write")
        totals.verified += 1
    ready_ids = {d.id for d in ready}
    for doc in client.docs:
        if doc.id not in ready_ids and not (doc.deleted or doc.maybe_deleted):
            client._violation(f"document {doc.id} ({doc.name}) acknowledged, now missing")
    report = await check(ledger, settled=True)
    totals.violations += [f"{v.invariant} {v.subject}: {v.detail}" for v in report.violations]
    stored = {info.name async for info in ledger.store.list(ledger.settings.blob_prefix)}
    expected = {d.blob for d in ready}
    if stored != expected:
        client._violation(f"container holds {len(stored - expected)} blob(s) of no ready "
                          f"document and lacks {len(expected - stored)}")


async def soak(storage: Storage, database_url: str, folder: Path, *, seconds: float,
               servers: int = 3, workers: int = 6, fault_rate: float = 0.03, seed: int = 1,
               kill_every: tuple[float, float] = (3.0, 7.0), min_kills: int = 0) -> Totals:
    """Run the soak for ``seconds`` (longer, up to three times that, until ``min_kills``
    serve processes were killed: a starved machine restarts them slowly) and verify; the
    totals (violations inside)."""
    totals = Totals()
    proxy = FaultProxy(storage.port, random_actions=FAULTS, rate=0.0, seed=seed).start()
    services = Services(folder, database_url, storage, proxy.port, servers)
    client = Client(services, totals, seed)
    try:
        await asyncio.gather(*(asyncio.to_thread(services.start_server, port)
                               for port in services.ports))  # started side by side
        services.start_sweepers(2)
        proxy.rate = fault_rate
        stop = asyncio.Event()
        tasks = [asyncio.create_task(client.run(stop)) for _ in range(workers)]
        tasks.append(asyncio.create_task(killer(services, totals, stop, seed, kill_every)))
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds or (
                totals.kills < min_kills and elapsed < 3 * seconds):
            await asyncio.sleep(0.5)
            for task in tasks:
                if task.done():
                    task.result()  # a crash of the harness itself: surface it
        stop.set()
        await asyncio.gather(*tasks)
        proxy.clear()
        totals.faults = Counter(proxy.injected)
        services.stop()
        for n in range(3):  # a pass per grace: rows a pass hands on are due in the next
            if code := services.sweep_once(FINAL_OFFSET + n * (DELETE_GRACE + 1)):
                totals.violations.append(f"final sweep {n + 1} exited {code}")
        store = storage.direct()
        settings = Settings(database_url=database_url, store_url=store.url,
                            upload_deadline=UPLOAD_DEADLINE, sweep_after=SWEEP_AFTER,
                            delete_grace=DELETE_GRACE)
        offset = FINAL_OFFSET + 3 * (DELETE_GRACE + 1)
        async with Ledger(Database(database_url), store, settings, clock_offset=offset,
                          migrate=False) as ledger:
            await verify(client, ledger, totals)
    finally:
        services.stop()
        await client.close()
        proxy.stop()
    totals.traces = services.traces(totals.violations)
    return totals
