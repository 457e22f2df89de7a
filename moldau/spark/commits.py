"""The sink's record of committed micro-batches, kept in a compacted Moldau topic.

The driver writes `key=Q, value={"batchId": B, ...}` for micro-batch B of query Q in the same transaction
as B's records (`moldau.spark.publish`), into the commits topic (one partition, cleanup.policy=compact, so
only the latest batch of each query is kept in the long run). The record is therefore visible to a
read_committed reader exactly when B's records are: a batch id at or below the recorded one was written
completely, and its replay after a crash writes nothing.

Everything here reads with isolation.level=read_committed, up to the last stable offset: a batch record
of a transaction that is still open, or was aborted, must not count as committed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.spark.fetch import FetchSettings, read_range
from moldau.spark.offsets import OffsetRange

PARTITION = 0
ISOLATION = "read_committed"


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
    create_unless_exists(admin, NewTopic(topic, num_partitions=1, replication_factor=-1,
                                         config={"cleanup.policy": "compact"}), timeout_s)
    _ENSURED.add((bootstrap, topic))


def create_unless_exists(admin: AdminClient, new: NewTopic, timeout_s: float) -> None:
    """Create `new`; a topic of that name that already exists is kept as it is."""
    topic = new.topic
    future = admin.create_topics([new], operation_timeout=timeout_s, request_timeout=timeout_s)[topic]
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def commit_record(query_id: str, batch_id: int, records: int) -> tuple[bytes, bytes]:
    """The key and value that record batch `batch_id` of `query_id` as committed."""
    value = {"queryId": query_id, "batchId": batch_id, "records": records, "committedAtMs": int(time.time() * 1000)}
    return query_id.encode(), json.dumps(value).encode()


def last_committed(bootstrap: str, conf: Mapping[str, str], topic: str, query_id: str,
                   timeout_ms: int = 30_000) -> int | None:
    """The highest batch id committed for `query_id`, or None; reads only what this process has not read.

    Reads up to the last stable offset, so a batch record behind a transaction that is still open is not
    seen yet; the driver calls this after init_transactions, which has aborted any such transaction.
    """
    index = _INDEXES.setdefault((bootstrap, topic), _Index())
    settings = FetchSettings(bootstrap=bootstrap, client_conf=dict(conf), isolation_level=ISOLATION,
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
    """The commits topic's last stable offset (0 if it does not exist yet).

    A read_committed client's watermark lookup is a ListOffsets at its isolation level, so `high` is the
    LSO: reading stops by offset there, never by counting records (markers and aborted records are gaps).
    """
    consumer = Consumer({**conf, "bootstrap.servers": bootstrap, "group.id": "moldau-spark-sink-lookup",
                         "enable.auto.commit": False, "isolation.level": ISOLATION})
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
