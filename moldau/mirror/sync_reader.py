"""Reads the offset syncs topic into an `OffsetSyncStore` in a background thread, and tells the store when it
has read to the end once (until then the store translates nothing)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from moldau.mirror.offset_syncs import OffsetSyncStore
from moldau.mirror.records import MalformedRecord, OffsetSync

__all__ = ["OffsetSyncReader"]

log = logging.getLogger(__name__)
POLL_S = 0.2


class OffsetSyncReader:
    """`start()` it; `translate` through it; `stop()` it. Safe to call from the task thread while it reads."""

    def __init__(self, consumer_config: dict[str, Any], topic: str) -> None:
        self._consumer = Consumer({**consumer_config, "group.id": "unused-mirror-offset-syncs",
                                   "enable.auto.commit": False, "enable.partition.eof": False})
        self._topic = topic
        self._store = OffsetSyncStore()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirror-offset-syncs", daemon=True)

    def start(self) -> None:
        self._consumer.assign([KafkaTopicPartition(self._topic, 0, OFFSET_BEGINNING)])
        self._thread.start()

    def translate(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        with self._lock:
            return self._store.translate(topic, partition, upstream_offset)

    def _end_offset(self) -> int | None:
        try:
            return int(self._consumer.get_watermark_offsets(KafkaTopicPartition(self._topic, 0), timeout=5)[1])
        except Exception:
            return None  # not reachable just now; asked again on the next round

    def _run(self) -> None:
        end = None
        caught_up = False
        position = -1
        while not self._stopping.is_set():
            if not caught_up and end is None:
                end = self._end_offset()
            for message in self._consumer.consume(500, POLL_S):
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("mirror: reading %s: %s", self._topic, error.str())
                    continue
                position = message.offset() or 0
                try:
                    sync = OffsetSync.from_record(message.key(), message.value())
                except MalformedRecord as e:
                    log.warning("mirror: skipping a malformed offset sync at %s-0@%d: %s", self._topic, position, e)
                    continue
                with self._lock:
                    self._store.add(sync)
            if not caught_up and end is not None and position + 1 >= end:
                with self._lock:
                    self._store.caught_up()
                caught_up = True

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._consumer.close()
