"""Hostile HTTP at a broker's console listener (`/metrics`, `/v1/client-metrics`) over real sockets: a flood of
scrapes, garbage and oversized bodies (OTLP-looking bytes POSTed where only GET is served), garbage request
lines, slow senders of request heads (slowloris) and idle connections beyond the listener's limit. Each gets a
clear HTTP error or a closed connection; Kafka clients and other HTTP clients keep being served, and the
broker's memory stays bounded."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.test_http_services import chunked_post, exchange, post, status_of
from tests.support.broker_process import BrokerProcess, rss_mb
from tests.support.clients import ck_produce, create_topic

MAX_CONNECTIONS = 100
HEADER_TIMEOUT_S = 1.0
BODY_LIMIT = 1024 * 1024
RSS_GROWTH_LIMIT_MB = 80
OTLP_GARBAGE = b"\x0a\xff\xff\xff\xff\x0f" + bytes(range(256)) * 64


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("hostile-console"), {
        "console.max.connections": str(MAX_CONNECTIONS),
        "console.request.header.timeout.ms": str(int(HEADER_TIMEOUT_S * 1000)),
        "console.max.request.bytes": str(BODY_LIMIT)})
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def console(broker: BrokerProcess) -> str:
    return broker.overrides["console.listeners"]


def get(url: str, timeout_s: float = 10.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        response.read()
        return int(response.status)


def test_a_flood_of_scrapes_leaves_kafka_and_other_http_clients_served(console_broker: BrokerProcess,
                                                                       tmp_path: Path) -> None:
    assert console_broker.proc is not None
    base = console(console_broker)
    topic = "hostile-console-flood"
    create_topic(console_broker.bootstrap, topic)
    before = rss_mb(console_broker.proc.pid)
    failures: list[str] = []

    def scrape(thread: int) -> None:
        for i in range(30):
            path = "/metrics" if (thread + i) % 2 else "/v1/client-metrics"
            try:
                if get(base + path) != 200:
                    failures.append(path)
            except OSError as exc:
                failures.append(f"{path}: {exc}")

    threads = [threading.Thread(target=scrape, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    produced = ck_produce(console_broker.bootstrap, topic, [{"value": b"v"} for _ in range(200)])
    for thread in threads:
        thread.join(120)
    assert not failures, failures[:5]
    assert [offset for _, offset in produced] == list(range(200))
    assert rss_mb(console_broker.proc.pid) - before < RSS_GROWTH_LIMIT_MB


def test_bodies_and_garbage_get_clear_errors(console_broker: BrokerProcess) -> None:
    base = console(console_broker)
    assert status_of(exchange(base, post("/v1/client-metrics", OTLP_GARBAGE,
                                         content_type="application/x-protobuf"))) == 405
    assert status_of(exchange(base, post("/metrics", b"{}", length=10**12))) == 413
    streamed = exchange(base, chunked_post("/v1/client-metrics", BODY_LIMIT + 2 * 1024 * 1024), timeout_s=30)
    assert status_of(streamed) in (405, 413, 0), streamed[:200]  # refused without the body being kept
    assert status_of(exchange(base, b"\x16\x03\x01\x02\x00" + bytes(range(256)) * 4, half_close=True)) in (400, 0)
    huge_header = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    assert status_of(exchange(base, huge_header)) in (400, 431, 0)
    assert status_of(exchange(base, b"GET /v1/client-metrics/not-a-uuid HTTP/1.1\r\nHost: x\r\n"
                                    b"Connection: close\r\n\r\n")) == 404
    assert get(base + "/metrics") == 200


def test_slow_and_idle_connections_are_bounded_and_timed_out(console_broker: BrokerProcess) -> None:
    base = console(console_broker)
    host, port = base.removeprefix("http://").split(":")
    slow, idle = [], []
    try:
        for _ in range(40):  # a request head that never completes
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            slow.append(sock)
        for _ in range(40):  # nothing sent at all
            idle.append(socket.create_connection((host, int(port)), timeout=10))
        started = time.monotonic()
        assert get(base + "/metrics") == 200  # the listener still serves others, promptly
        assert time.monotonic() - started < 5
        ck_produce(console_broker.bootstrap, "hostile-console-slow", [{"value": b"v"}])
        for sock in slow + idle:  # each is answered 408 and closed once its head is late
            answer = b"".join(iter(lambda s=sock: s.recv(65536), b""))  # type: ignore[misc]
            assert status_of(answer) == 408, answer[:100]
    finally:
        for sock in slow + idle:
            sock.close()


def test_connections_beyond_the_limit_are_refused(console_broker: BrokerProcess) -> None:
    base = console(console_broker)
    host, port = base.removeprefix("http://").split(":")
    held: list[socket.socket] = []
    try:
        for _ in range(MAX_CONNECTIONS):
            held.append(socket.create_connection((host, int(port)), timeout=10))
        time.sleep(0.3)  # the listener has accepted them all
        extra = exchange(base, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_of(extra) == 503, extra[:100]
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.3)
    assert get(base + "/metrics") == 200  # served again once they are gone
