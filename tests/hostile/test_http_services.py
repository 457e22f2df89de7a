"""Hostile HTTP at Moldau's HTTP services, the schema registry (in the broker) and the Connect REST API (in a
worker), over real sockets: huge declared lengths, bodies larger than the bound, truncated bodies, not JSON,
JSON of the wrong types and nulls, garbage request lines, and a flood of them. Each gets an error answer or a
closed connection; the process stays up with memory bounded, and nothing wrong is stored."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.broker_process import BrokerProcess, rss_mb
from tests.support.connect_worker import WorkerProcess, running_worker

BODY_LIMIT = 16 * 1024 * 1024  # both services' bound on a request body
RSS_GROWTH_LIMIT_MB = 120


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(tmp_path_factory.mktemp("hostile-connect"), shared_broker.bootstrap) as proc:
        yield proc


def exchange(url: str, raw: bytes, timeout_s: float = 10.0, half_close: bool = False) -> bytes:
    """Send raw bytes (then half-close, for a request that never completes) and return all the service answers
    until it closes. Complete requests say `Connection: close`; a half-close would let the server drop an
    answer still being worked out."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=timeout_s) as sock:
        try:
            sock.sendall(raw)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the service answered and closed before taking all of it
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def post(path: str, body: bytes, length: int | None = None, content_type: str = "application/json") -> bytes:
    """A request with a body; `path` may start with its method ("PUT /x"), else it is a POST."""
    method, _, path = path.rpartition(" ")
    return (f"{method or 'POST'} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\nConnection: close\r\n\r\n").encode() + body


def chunked_post(path: str, total: int) -> bytes:
    """A chunked body of `total` bytes: no Content-Length to refuse it by, so the bound must hold as it streams."""
    chunk = b"x" * (1024 * 1024)
    method, _, path = path.rpartition(" ")
    head = (f"{method or 'POST'} {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n").encode()
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(total // len(chunk)))
    return head + body + b"0\r\n\r\n"


HOSTILE_BODIES = [
    b"",
    b"{not json",
    b"\xff\xfe\x00garbage",
    b"null",
    b"[]",
    b"12345",
    b'"a string"',
    b'{"name": null, "config": null}',
    b'{"name": 7, "config": [1, 2]}',
    b'{"schema": null}',
    b'{"schema": 12, "schemaType": ["AVRO"], "references": "x"}',
    b'{"schema": "{}", "references": [{"name": null, "subject": 5, "version": "latest"}]}',
    b'{"compatibility": {"level": 1}}',
    b"[" * 100_000 + b"]" * 100_000,
]


def refused(answer: bytes) -> bool:
    """A 4xx with a JSON error body; or, from Connect's validate endpoint, a 200 listing the config's errors
    (Kafka Connect answers a bad config there that way)."""
    status, body = status_of(answer), json.loads(answer.split(b"\r\n\r\n", 1)[1])
    return 400 <= status < 500 or (status == 200 and body.get("error_count", 0) > 0)


def assert_survives(url: str, paths: list[str], pid: int) -> None:
    before = rss_mb(pid)
    for path in paths:
        declared = exchange(url, post(path, b"{}", length=10**12))
        assert status_of(declared) in (413, 0), declared[:200]  # refused by its declared length, or closed
        streamed = exchange(url, chunked_post(path, BODY_LIMIT + 2 * 1024 * 1024), timeout_s=30)
        assert status_of(streamed) in (413, 0), streamed[:200]
        truncated = exchange(url, post(path, b'{"name": "trunc', length=1000), half_close=True)
        assert status_of(truncated) in (400, 0), truncated[:200]  # the body never completes: no 2xx
        for body in HOSTILE_BODIES:
            answer = exchange(url, post(path, body))
            assert refused(answer), (path, body[:60], answer[:300])
        garbage = exchange(url, b"\x16\x03\x01\x02\x00" + bytes(range(256)) * 4, half_close=True)
        assert not garbage.startswith(b"HTTP/1.1 2")
    flood(url, paths[0])
    assert rss_mb(pid) - before < RSS_GROWTH_LIMIT_MB


def flood(url: str, path: str, threads: int = 8, each: int = 50) -> None:
    failures: list[str] = []

    def send() -> None:
        for i in range(each):
            answer = exchange(url, post(path, HOSTILE_BODIES[i % len(HOSTILE_BODIES)]))
            if not refused(answer):
                failures.append(answer[:120].decode(errors="replace"))

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(120)
    assert not failures, failures[:5]


def test_schema_registry_refuses_hostile_requests(shared_broker: BrokerProcess) -> None:
    assert shared_broker.proc is not None
    url = shared_broker.registry_url
    assert_survives(url, ["/subjects/hostile-value/versions", "/subjects/hostile-value",
                          "/compatibility/subjects/hostile-value/versions"], shared_broker.proc.pid)
    subjects = json.loads(exchange(url, b"GET /subjects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                          .split(b"\r\n\r\n", 1)[1])
    assert "hostile-value" not in subjects  # nothing of it was registered
    assert shared_broker.running


def test_connect_rest_api_refuses_hostile_requests(worker: WorkerProcess, tmp_path: Path) -> None:
    assert worker.proc is not None
    assert_survives(worker.url, ["/connectors", "PUT /connector-plugins/FileStreamSource/config/validate"],
                    worker.proc.pid)
    status, connectors = worker.request("GET", "/connectors")
    assert status == 200 and connectors == []  # nothing was created
    created = worker.request("POST", "/connectors", {"name": "after-hostile", "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "after-hostile"}})
    assert created[0] == 201, created
    assert worker.request("DELETE", "/connectors/after-hostile")[0] == 204
