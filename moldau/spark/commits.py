"""The sink's record of committed micro-batches, kept in a compacted Moldau topic.

After every task of micro-batch B of query Q has had its records acknowledged, the driver appends
`key=Q, value={"batchId": B, ...}` to the commits topic (one partition, cleanup.policy=compact, so only
the latest batch of each query is kept in the long run). When Spark replays a micro-batch after a crash,
its tasks look here first: a batch id at or below the recorded one was written completely, and is skipped.

A crash after the records are acknowledged but before this record is written still duplicates that one
batch on replay: that window closes only with transactions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.spark.fetch import FetchSettings, read_range
from moldau.spark.offsets import OffsetRange

PARTITION = 0


@dataclass
class _Index:
    """What one process has read of one commits topic: the next offset and each query's last batch."""

    next_offset: int = 0
    last_batch: dict[str, int] = field(default_factory=dict)


# Spark reuses its Python workers across tasks, so a per-process index lets each lookup read only the
# commit records appended since the previous one.
_INDEXES: dict[tuple[str, str], _Index] = {}
_ENSURED: set[tuple[str, str]] = set()


def ensure_topic(bootstrap: str, conf: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> None:
    """Create the commits topic (compacted, one partition) unless it exists; once per process."""
    if (bootstrap, topic) in _ENSURED:
        return
    admin = AdminClient({**conf, "bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    future = admin.create_topics([new], operation_timeout=timeout_s, request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    _ENSURED.add((bootstrap, topic))


def record_commit(bootstrap: str, conf: Mapping[str, str], topic: str, query_id: str, batch_id: int,
                  records: int, timeout_s: float = 30.0) -> None:
    """Append (query_id, batch_id) to the commits topic and wait until the broker has acknowledged it."""
    producer = Producer({**conf, "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    value = {"queryId": query_id, "batchId": batch_id, "records": records, "committedAtMs": int(time.time() * 1000)}
    errors: list[KafkaError] = []
    producer.produce(topic, key=query_id.encode(), value=json.dumps(value).encode(), partition=PARTITION,
                     on_delivery=lambda err, _msg: errors.append(err) if err is not None else None)
    remaining = producer.flush(timeout_s)
    if remaining or errors:
        raise RuntimeError(f"could not record batch {batch_id} of query {query_id} in {topic}: "
                           f"{errors[0].str() if errors else 'not acknowledged in time'}")


def last_committed(bootstrap: str, conf: Mapping[str, str], topic: str, query_id: str,
                   timeout_ms: int = 30_000) -> int | None:
    """The highest batch id recorded for `query_id`, or None; reads only what this process has not read."""
    index = _INDEXES.setdefault((bootstrap, topic), _Index())
    settings = FetchSettings(bootstrap=bootstrap, client_conf=dict(conf), isolation_level="read_uncommitted",
                             include_headers=False, fail_on_data_loss=False, poll_timeout_ms=timeout_ms)
    end = _end_offset(bootstrap, conf, topic, timeout_ms)
    if end < index.next_offset:
        # The topic was deleted and created again: what this process remembers is void.
        index = _INDEXES[(bootstrap, topic)] = _Index()
    if end > index.next_offset:
        for batch in read_range(settings, OffsetRange(topic, PARTITION, index.next_offset, end)):
            for key, value in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist(), strict=True):
                _remember(index, key, value)
        index.next_offset = end
    return index.last_batch.get(query_id)


def _remember(index: _Index, key: bytes | None, value: bytes | None) -> None:
    if key is None or value is None:
        return
    try:
        batch_id = int(json.loads(value)["batchId"])
    except (ValueError, KeyError, TypeError):
        return  # not ours: the topic is documented as the sink's own, but stay robust
    query = key.decode(errors="replace")
    index.last_batch[query] = max(batch_id, index.last_batch.get(query, -1))


def _end_offset(bootstrap: str, conf: Mapping[str, str], topic: str, timeout_ms: int) -> int:
    """The commits topic's end offset (0 if it does not exist yet)."""
    consumer = Consumer({**conf, "bootstrap.servers": bootstrap, "group.id": "moldau-spark-sink-lookup",
                         "enable.auto.commit": False})
    try:
        _low, high = consumer.get_watermark_offsets(CkTopicPartition(topic, PARTITION), timeout=timeout_ms / 1000,
                                                    cached=False)
        return int(high)
    except KafkaException as exc:
        if exc.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
            return 0
        raise
    finally:
        consumer.close()
