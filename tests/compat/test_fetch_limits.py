"""The broker's `fetch.max.bytes` against a real `moldau server` process: a Fetch that asks for more gets at most
that many bytes (the first batch still whole), its `min_bytes` is lowered to it, and the clients read a topic
through such answers."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.fetch.v12 import request as fetch_v12

from moldau.net.ports import free_ports
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic
from tests.support.raw_client import RawClient

FETCH_MAX_BYTES = 4096
MIB = 2**20


@pytest.fixture(scope="module")
def capped_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    (port,) = free_ports(1)
    proc = BrokerProcess(tmp_path_factory.mktemp("fetch-limits"), {"fetch.max.bytes": str(FETCH_MAX_BYTES)},
                         port=port)
    proc.start()
    try:
        yield proc
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()


def batches_topic(bootstrap: str, values: list[bytes]) -> str:
    """A topic whose records are each a batch of their own (one produce call, one flush)."""
    topic = f"fetch-limits-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value, partition=0)
        assert producer.flush(10) == 0
    return topic


def fetch(bootstrap: str, topic: str, offset: int, max_bytes: int, min_bytes: int = 1,
          max_wait_ms: int = 0) -> Any:
    part = make(fetch_v12.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
    request = make(fetch_v12.FetchRequest, cluster_id=None, replica_id=-1,
                   max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=min_bytes, max_bytes=max_bytes,
                   isolation_level=0, session_id=0, session_epoch=-1,
                   topics=(make(fetch_v12.FetchTopic, topic=topic, partitions=(part,)),),
                   forgotten_topics_data=(), rack_id="")
    with RawClient(bootstrap, timeout_s=30) as client:
        response = client.request(request)
    answer = response.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none
    return answer


def test_a_fetch_asking_for_more_gets_at_most_fetch_max_bytes(capped_broker: BrokerProcess) -> None:
    topic = batches_topic(capped_broker.bootstrap, [bytes([i]) * 1000 for i in range(20)])  # ~1.1 KB batches
    records = fetch(capped_broker.bootstrap, topic, 0, max_bytes=16 * MIB).records
    assert 3 * 1000 < len(records) <= FETCH_MAX_BYTES  # three whole batches fit, the fourth does not
    # Under the cap, the request's own limit still holds.
    assert 1000 < len(fetch(capped_broker.bootstrap, topic, 0, max_bytes=2000).records) <= 2000


def test_the_first_batch_comes_whole_even_when_larger(capped_broker: BrokerProcess) -> None:
    topic = batches_topic(capped_broker.bootstrap, [b"x" * 10_000, b"y" * 100])
    records = fetch(capped_broker.bootstrap, topic, 0, max_bytes=16 * MIB).records
    assert 10_000 < len(records) < 10_000 + 200  # the first batch alone, whole


def test_min_bytes_is_lowered_to_fetch_max_bytes(capped_broker: BrokerProcess) -> None:
    """min_bytes of 8 MiB with 10 KB available: served at once (the lowered min_bytes is met), not after the wait."""
    topic = batches_topic(capped_broker.bootstrap, [b"z" * 10_000])
    started = time.monotonic()
    answer = fetch(capped_broker.bootstrap, topic, 0, max_bytes=16 * MIB, min_bytes=8 * MIB, max_wait_ms=20_000)
    assert len(answer.records) > 10_000
    assert time.monotonic() - started < 10  # well before the 20 s wait


def test_clients_read_a_topic_through_capped_answers(capped_broker: BrokerProcess) -> None:
    values = [bytes([i % 256]) * 900 for i in range(60)]
    topic = batches_topic(capped_broker.bootstrap, values)
    got = ck_consume(capped_broker.bootstrap, topic, len(values), partitions=[0])
    assert [r.value for r in got] == values
