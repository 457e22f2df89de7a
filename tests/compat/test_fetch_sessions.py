"""Incremental fetch sessions (KIP-227) against a real `moldau server` process: the session rules over the wire
(raw Fetch v12 requests), kafka-python consuming several partitions in a session while records are produced, and
librdkafka, which keeps no sessions, consuming as before."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Producer
from kio.schema.fetch.v12 import request as fetch_v12

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.metrics_scrape import Scrape
from tests.support.raw_client import RawClient

SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def _fetch(topic: str, offsets: dict[int, int], session_id: int, epoch: int, forgotten: Sequence[int] = (),
           max_wait_ms: int = 0) -> Any:
    parts = tuple(make(fetch_v12.FetchPartition, partition=p, current_leader_epoch=-1, fetch_offset=offset,
                       last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                  for p, offset in offsets.items())
    topics = (make(fetch_v12.FetchTopic, topic=topic, partitions=parts),) if parts else ()
    dropped = (make(fetch_v12.ForgottenTopic, topic=topic, partitions=tuple(forgotten)),) if forgotten else ()
    return make(fetch_v12.FetchRequest, cluster_id=None, replica_id=-1,
                max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=1 << 24,
                isolation_level=0, session_id=session_id, session_epoch=epoch, topics=topics,
                forgotten_topics_data=dropped, rack_id="")


def _answered(response: Any) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, bytes of records) of each partition in a response."""
    return {p.partition_index: (p.high_watermark, len(p.records or b""))
            for topic in response.responses for p in topic.partitions}


def test_sessions_over_the_wire(broker: BrokerProcess) -> None:
    topic = f"sessions-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=3)
    ck_produce(broker.bootstrap, topic, [{"value": b"a", "partition": 0}, {"value": b"b", "partition": 1}])
    with RawClient(broker.bootstrap) as client:
        full = client.request(_fetch(topic, {0: 0, 1: 0, 2: 0}, 0, 0))
        assert full.error_code == ErrorCode.none and full.session_id != 0
        session = full.session_id
        assert set(_answered(full)) == {0, 1, 2}
        # Nothing changed: the incremental answer names no partition.
        quiet = client.request(_fetch(topic, {0: 1, 1: 1}, session, 1))
        assert quiet.session_id == session and _answered(quiet) == {}
        # A wrong epoch or an unknown id: a top-level error with no partitions; the session survives a wrong epoch.
        wrong = client.request(_fetch(topic, {}, session, 7))
        assert wrong.error_code == ErrorCode.invalid_fetch_session_epoch and _answered(wrong) == {}
        unknown = client.request(_fetch(topic, {}, session ^ 0x5A5A, 1))
        assert unknown.error_code == ErrorCode.fetch_session_id_not_found and _answered(unknown) == {}
        # A record on partition 2, which the incremental requests never listed again: it alone is answered, and
        # a long poll that lists no partition wakes for it.
        waiter = threading.Timer(0.5, ck_produce, (broker.bootstrap, topic, [{"value": b"c", "partition": 2}]))
        waiter.start()
        started = time.monotonic()
        woken = client.request(_fetch(topic, {}, session, 2, max_wait_ms=10_000))
        waiter.join()
        assert time.monotonic() - started < 8
        assert woken.error_code == ErrorCode.none and set(_answered(woken)) == {2} and _answered(woken)[2][1] > 0
        # Partition 2 forgotten: a record there is no longer answered; partition 0 moved past its record.
        client.request(_fetch(topic, {2: 1}, session, 3))
        ck_produce(broker.bootstrap, topic, [{"value": b"d", "partition": 2}])
        after = client.request(_fetch(topic, {}, session, 4, forgotten=[2]))
        assert _answered(after) == {}
        scrape = Scrape(broker.metrics_url)
        assert scrape.value(SESSIONS) == 1 and scrape.value(PARTITIONS_CACHED) == 2
    # Sessions belong to the broker: another connection carries on with the same session.
    with RawClient(broker.bootstrap) as other:
        ck_produce(broker.bootstrap, topic, [{"value": b"e", "partition": 0}])
        moved = other.request(_fetch(topic, {}, session, 5))
        assert set(_answered(moved)) == {0}
        closed = other.request(_fetch(topic, {0: 2}, session, -1))
        assert closed.session_id == 0 and set(_answered(closed)) == {0}
        assert other.request(_fetch(topic, {}, session, 6)).error_code == ErrorCode.fetch_session_id_not_found
    assert Scrape(broker.metrics_url).value(SESSIONS) == 0


def test_kafka_python_consumes_in_an_incremental_session_while_records_are_produced(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = f"incremental-{uuid.uuid4().hex[:8]}"
    partitions, per_partition = 6, 400
    create_topic(broker.bootstrap, topic, partitions=partitions)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100,
                             enable_incremental_fetch_sessions=True)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})

    def produce() -> None:
        for i in range(per_partition):
            for p in range(partitions):
                producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
            if i % 25 == 0:
                producer.flush(30)
                time.sleep(0.05)  # spread over the consumer's fetches, many of them incremental
        producer.flush(30)

    writer = threading.Thread(target=produce)
    got: dict[int, list[str]] = {p: [] for p in range(partitions)}
    sessions_seen = 0.0
    session_ids: set[int] = set()
    top_epoch = 0
    try:
        writer.start()
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < partitions * per_partition and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition].extend(r.value.decode() for r in records)
            scrape = Scrape(broker.metrics_url)
            if scrape.value(SESSIONS) >= 1:
                sessions_seen = max(sessions_seen, scrape.value(PARTITIONS_CACHED))
            # kafka-python's own view of its session with the broker (no public API for it).
            for handler in consumer._fetcher._session_handlers.values():
                if handler.next_metadata.session_id:
                    session_ids.add(handler.next_metadata.session_id)
                    top_epoch = max(top_epoch, handler.next_metadata.epoch)
    finally:
        writer.join()
        consumer.close()
    for p in range(partitions):
        assert got[p] == [f"{p}:{i}" for i in range(per_partition)], p
    assert sessions_seen == partitions  # the consumer held a session of all its partitions
    # ... and fetched incrementally in it, one epoch after another, never told to start over.
    assert len(session_ids) == 1 and top_epoch >= 5, (session_ids, top_epoch)


def test_librdkafka_keeps_no_session_and_still_consumes(broker: BrokerProcess) -> None:
    topic = f"sessionless-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=3)
    ck_produce(broker.bootstrap, topic, [{"value": f"{i}".encode(), "partition": i % 3} for i in range(90)])
    assert len(ck_consume(broker.bootstrap, topic, 90)) == 90
    assert Scrape(broker.metrics_url).value(SESSIONS) == 0
