"""Zero-copy fetch against a real `moldau server` process: one broker with a PLAINTEXT listener, which sends fetched
record batches from the segment files with sendfile, and an SSL listener, which always copies them. The same Fetch
request gets byte-identical answers from both, also many of them pipelined on one connection; the real clients
read what was produced, big and small; a consumer that goes away mid-transfer and a topic deleted while its
segments are being sent leave the broker serving and the answer whole."""

from __future__ import annotations

import datetime
import hashlib
import io
import os
import random
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.fetch.v12 import request as fetch_v12
from kio.serial import entity_writer

from moldau.net.ports import free_ports
from moldau.protocol.codec import make
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.tls import Pki, make_pki

MIB = 2**20
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class Broker:
    proc: BrokerProcess
    pki: Pki
    plaintext: str
    ssl: str


@pytest.fixture(scope="module")
def zc_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("zero-copy-broker")
    pki = make_pki(base / "pki")
    plain, ssl_port = free_ports(2)
    proc = BrokerProcess(base, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        **pki.broker_config("none"),
        "log.segment.bytes": str(MIB),  # fetches span segments
        "log.segment.delete.delay.ms": "0",  # a deleted segment's descriptor is closed at once
        "fetch.zero.copy.enable": "true",
    }, port=plain)
    proc.start()
    try:
        yield Broker(proc, pki, f"127.0.0.1:{plain}", f"127.0.0.1:{ssl_port}")
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
            assert "unexpected error" not in proc.log_path.read_text(), proc.log_tail()
        finally:
            proc.cleanup()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def hex_values(count: int, value_bytes: int, seed: int) -> list[bytes]:
    """Random values, as hex text so that kcat can print them one a line."""
    rng = random.Random(seed)
    return [rng.randbytes(value_bytes // 2).hex().encode() for _ in range(count)]


def filled_topic(broker: Broker, count: int, value_bytes: int, seed: int,
                 config: dict[str, str] | None = None) -> tuple[str, list[bytes]]:
    topic = topic_name("zc")
    create_topic(broker.plaintext, topic, config=config)
    values = hex_values(count, value_bytes, seed)
    ck_produce(broker.plaintext, topic, [{"value": v} for v in values], **{"batch.size": MIB})
    return topic, values


# --------------------------------------------------------------------------- raw requests


def _encode(request: Any, api_key: int, version: int, correlation_id: int) -> bytes:
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    client_id = b"zero-copy-test"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + b"\x00"
    payload = header + body.getvalue()
    return _SIZE.pack(len(payload)) + payload


def fetch_request(topic: str, offset: int, max_bytes: int, correlation_id: int) -> bytes:
    part = make(fetch_v12.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
    request = make(fetch_v12.FetchRequest, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0),
                   min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                   topics=(make(fetch_v12.FetchTopic, topic=topic, partitions=(part,)),),
                   forgotten_topics_data=(), rack_id="")
    return _encode(request, 1, 12, correlation_id)


def api_versions_request(correlation_id: int) -> bytes:
    request = make(api_versions_v3.ApiVersionsRequest, client_software_name="test", client_software_version="1")
    return _encode(request, 18, 3, correlation_id)


def read_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        chunk = sock.recv(min(size - len(out), MIB))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {size} bytes")
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes:
    return read_exactly(sock, _SIZE.unpack(read_exactly(sock, 4))[0])


def correlation_id(frame: bytes) -> int:
    return int(_SIZE.unpack_from(frame)[0])


def connect(broker: Broker, listener: str, receive_buffer: int = 0) -> socket.socket:
    host, port = (broker.plaintext if listener == "plaintext" else broker.ssl).split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:  # before connecting, so that the window stays small
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(30)
    sock.connect((host, int(port)))
    if listener == "ssl":
        return broker.pki.client_context().wrap_socket(sock, server_hostname=host)
    return sock


def exchange(broker: Broker, listener: str, requests: list[bytes]) -> list[bytes]:
    """Send every request at once (pipelined), then read their answers."""
    with connect(broker, listener) as sock:
        sock.sendall(b"".join(requests))
        return [read_frame(sock) for _ in requests]


# --------------------------------------------------------------------------- tests

# (offset, max bytes): one batch past a tiny limit, under and over the 128 KiB sendfile threshold, a whole segment
FETCHES = [(0, 1), (0, 16 * 1024), (0, 200 * 1024), (5, MIB), (0, 3 * MIB), (40, 16 * MIB), (10_000, MIB)]


def test_plaintext_answers_are_byte_identical_to_the_copying_tls_ones(zc_broker: Broker) -> None:
    small_topic, _ = filled_topic(zc_broker, 2000, 100, seed=1)
    big_topic, _ = filled_topic(zc_broker, 120, 50_000, seed=2)
    requests = [fetch_request(topic, offset, max_bytes, cid)
                for cid, (topic, (offset, max_bytes)) in enumerate(
                    (t, f) for t in (small_topic, big_topic) for f in FETCHES)]
    copied = exchange(zc_broker, "ssl", requests)
    sent = exchange(zc_broker, "plaintext", requests)
    assert [len(f) for f in sent] == [len(f) for f in copied]
    assert sent == copied
    assert max(len(f) for f in sent) > 512 * 1024  # a read ends with its segment (1 MiB here)


def test_many_pipelined_fetches_on_one_connection_come_back_whole_and_in_order(zc_broker: Broker) -> None:
    topic, _ = filled_topic(zc_broker, 100, 50_000, seed=3)
    rng = random.Random(4)
    requests = []
    for cid in range(60):
        if cid % 5 == 4:  # small answers written by the transport between the sendfile'd ones
            requests.append(api_versions_request(cid))
        else:
            requests.append(fetch_request(topic, rng.randrange(0, 100), rng.choice([100 * 1024, MIB, 4 * MIB]),
                                          cid))
    sent = exchange(zc_broker, "plaintext", requests)
    assert [correlation_id(f) for f in sent] == list(range(60))
    assert sent == exchange(zc_broker, "ssl", requests)


@pytest.mark.parametrize("value_bytes", [100, 40_000], ids=["small", "big"])
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "kcat", "confluent-kafka-ssl"])
def test_clients_read_what_was_produced(zc_broker: Broker, client: str, value_bytes: int) -> None:
    count = 3000 if value_bytes == 100 else 150
    topic, values = filled_topic(zc_broker, count, value_bytes, seed=value_bytes)
    assert consume(zc_broker, client, topic, count) == values


def consume(broker: Broker, client: str, topic: str, count: int) -> list[bytes]:
    if client.startswith("confluent-kafka"):
        conf = broker.pki.confluent(certificate=False) if client.endswith("ssl") else {}
        bootstrap = broker.ssl if conf else broker.plaintext
        return [r.value for r in ck_consume(bootstrap, topic, count, conf=conf) if r.value is not None]
    if client == "kafka-python":
        consumer = KafkaConsumer(topic, bootstrap_servers=broker.plaintext, auto_offset_reset="earliest",
                                 consumer_timeout_ms=15_000, fetch_max_bytes=8 * MIB,
                                 max_partition_fetch_bytes=4 * MIB)
        try:
            got = []
            for message in consumer:
                got.append(message.value)
                if len(got) == count:
                    break
            return got
        finally:
            consumer.close()
    out = subprocess.run(["kcat", "-C", "-b", broker.plaintext, "-t", topic, "-o", "beginning", "-c", str(count),
                          "-e", "-f", "%s\\n"], capture_output=True, timeout=60, check=True).stdout
    return out.splitlines()


def test_a_consumer_gone_mid_transfer_leaves_the_broker_serving(zc_broker: Broker) -> None:
    topic, values = filled_topic(zc_broker, 200, 50_000, seed=5)
    for attempt in range(3):
        sock = connect(zc_broker, "plaintext", receive_buffer=16 * 1024)
        sock.sendall(b"".join(fetch_request(topic, 0, 16 * MIB, cid) for cid in range(5)))
        assert len(read_exactly(sock, 4096 * (attempt + 1))) > 0  # the broker is in the middle of sending
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not a clean close
        sock.close()
    requests = [fetch_request(topic, 0, 16 * MIB, 7)]
    assert exchange(zc_broker, "plaintext", requests) == exchange(zc_broker, "ssl", requests)
    assert consume(zc_broker, "kafka-python", topic, len(values)) == values


def test_a_topic_deleted_while_its_segments_are_sent_still_arrives_whole(zc_broker: Broker) -> None:
    # About 10 MB in one segment, so that one fetch answers with all of it.
    topic, _ = filled_topic(zc_broker, 200, 50_000, seed=6, config={"segment.bytes": str(64 * MIB)})
    request = fetch_request(topic, 0, 16 * MIB, 1)
    [expected] = exchange(zc_broker, "ssl", [request])
    admin = AdminClient({"bootstrap.servers": zc_broker.plaintext})
    assert len(expected) > 8 * MIB
    with connect(zc_broker, "plaintext", receive_buffer=16 * 1024) as sock:
        sock.sendall(request)
        start = read_exactly(sock, 64 * 1024)  # the broker is sending; most of the answer is still in the files
        admin.delete_topics([topic])[topic].result(timeout=30)
        logs = Path(zc_broker.proc.overrides["log.dirs"])
        deadline = time.monotonic() + 30
        while any(d.startswith(f"{topic}-") for d in os.listdir(logs)):
            assert time.monotonic() < deadline, "the deleted topic's segments are still on disk"
            time.sleep(0.1)
        time.sleep(2.5)  # the broker's maintenance pass (once a second) closes the deleted segments' descriptors
        filled_topic(zc_broker, 20, 1000, seed=8)  # new segment files, which may get the numbers closed
        rest = read_exactly(sock, 4 + len(expected) - len(start))
    answer = start + rest
    assert _SIZE.unpack_from(answer)[0] == len(expected)
    assert hashlib.sha256(answer[4:]).digest() == hashlib.sha256(expected).digest()


def test_tls_clients_are_not_affected(zc_broker: Broker) -> None:
    topic, values = filled_topic(zc_broker, 100, 40_000, seed=7)
    context = ssl.create_default_context(cafile=str(zc_broker.pki.ca))
    consumer = KafkaConsumer(topic, bootstrap_servers=zc_broker.ssl, security_protocol="SSL", ssl_context=context,
                             auto_offset_reset="earliest", consumer_timeout_ms=15_000)
    try:
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
    finally:
        consumer.close()
    assert got == values
