"""Hostile webhook receivers against a real ``blobledger serve`` (SQLite, a local store):
a compressed answer that would decode to gigabytes costs serve nothing (its body is never
decoded, at most a few KiB of it read), and a receiver that trickles its answer forever
is cut at ``BLOBLEDGER_EVENT_TIMEOUT`` without holding another receiver's delivery."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import httpx
import pytest

from tests.events.receiver import SECRET
from tests.hostile.receivers import gzip_of_zeros, receiving, rss_kib
from tests.hostile.support import clean_env, serve
from tests.support.server import blobledger_command
from tests.support.services import free_port

#: the bomb: a quarter of a megabyte on the wire, 256 MiB decoded
BOMB = 256 * 1024 * 1024
MIB = 1024


def _hooks(*urls: str, timeout: str) -> dict[str, str]:
    return {"BLOBLEDGER_WEBHOOK_URLS": ",".join(urls), "BLOBLEDGER_WEBHOOK_SECRET": SECRET,
            "BLOBLEDGER_EVENT_INTERVAL": "0.1", "BLOBLEDGER_EVENT_BACKOFF": "0.1s",
            "BLOBLEDGER_EVENT_TIMEOUT": timeout, "BLOBLEDGER_EVENT_MAX_ATTEMPTS": "1000"}


def _create(base: str, name: str) -> None:
    answer = httpx.post(f"{base}/documents", params={"name": name}, content=b"x",
                        headers={"content-type": "text/plain"})
    assert answer.status_code == 201, answer.text


def _wait(until: float, done: object) -> None:
    while not done():  # type: ignore[operator]
        assert time.monotonic() < until, "not within the bound"
        time.sleep(0.05)


def test_a_compressed_answer_is_never_decoded() -> None:
    bomb = gzip_of_zeros(BOMB)

    def answer(conn: socket.socket) -> None:  # refused, so that serve tries again
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Encoding: gzip\r\n"
                     b"Content-Type: text/plain\r\nContent-Length: "
                     + str(len(bomb)).encode() + b"\r\n\r\n" + bomb)

    with receiving(answer) as receiver, serve(env=_hooks(receiver.url, timeout="5s")) as srv:
        _, before = rss_kib(srv.process.pid)
        _create(srv.url, "bomb.txt")
        _wait(time.monotonic() + 120, lambda: receiver.count() >= 3)
        _, peak = rss_kib(srv.process.pid)
    # decoding one answer whole costs twice the bomb (the chunks and their join): 512 MiB;
    # the bound is a tenth of that
    assert peak - before < 48 * MIB, (before, peak)


def test_a_trickling_receiver_is_cut_at_the_deadline_and_holds_no_other() -> None:
    def trickle(conn: socket.socket) -> None:  # a byte every half second, for ever
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while True:
            conn.sendall(b".")
            time.sleep(0.5)

    def good(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    deadline = 2.0
    with receiving(trickle) as slow, receiving(good) as fine, \
            serve(env=_hooks(slow.url, fine.url, timeout=f"{deadline:g}s")) as srv:
        _create(srv.url, "slow.txt")
        bound = time.monotonic() + 10 * deadline  # never, without a deadline for the call
        _wait(bound, lambda: fine.count() >= 1 and len(slow.ended) >= 1)
        slow_cut = slow.ended[0]
        good_arrived = fine.requests[0][0]
    # the slow receiver's call was cut (the deadline), and the good receiver had the event
    # while the slow one still held its call open (neither waits for the other)
    assert good_arrived < slow_cut


@pytest.mark.slow
def test_a_webhook_urls_credentials_are_never_written_out() -> None:
    def refuse(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")

    with receiving(refuse) as receiver:
        hook = receiver.url.replace("://", "://hooks:s3cret-pass@") + "?token=s3cret-token"
        env = {**_hooks(hook, timeout="5s"), "BLOBLEDGER_EVENT_MAX_ATTEMPTS": "1"}
        with serve(env=env) as srv:
            _create(srv.url, "secret.txt")
            _wait(time.monotonic() + 60, lambda: "is dead" in srv.log_text())
            settings = clean_env(**env, BLOBLEDGER_DATABASE_URL=f"sqlite:///{srv.database}",
                                 BLOBLEDGER_STORE_URL=f"file://{srv.folder / 'store'}")
            listed = _cli(settings, "events", "list", "--json")
            event_id = json.loads(listed.splitlines()[0])["id"]
            written = {"serve's log": srv.log_text(),
                       "events show": _cli(settings, "events", "show", event_id),
                       "events show --json": _cli(settings, "events", "show", event_id,
                                                  "--json"),
                       "config": _cli(settings, "config"),
                       "config --json": _cli(settings, "config", "--json")}
    for where, text in written.items():
        assert "127.0.0.1" in text, (where, text)  # the URL is there, its secrets not
        assert "s3cret" not in text, (where, text)
    assert "hooks:****@127.0.0.1" in written["events show"]
    assert "token=REDACTED" in written["config"]


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(blobledger_command(*args), env=env, capture_output=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done
    return done.stdout.decode()


def test_webhooks_are_sent_past_the_environments_proxy() -> None:
    def good(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")

    nowhere = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proxies = {name: nowhere for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY",
                                          "all_proxy")}
    with receiving(good) as fine, \
            serve(env={**_hooks(fine.url, timeout="5s"), **proxies}) as srv:
        _create(srv.url, "direct.txt")
        _wait(time.monotonic() + 60, lambda: fine.count() >= 1)
