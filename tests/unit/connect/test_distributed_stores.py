"""How the distributed worker's stores read Kafka Connect's records (as another worker or Kafka wrote them):
task configs take effect only at their commit, tombstones forget, STOPPED is read from `state.v2`, offsets are
keyed by connector and partition, and a stale status from an older generation does not win. The records are
handed to the stores as their topic's consumer would; nothing is produced."""

from __future__ import annotations

import json
from typing import Any

from moldau.connect.distributed.kafka_stores import (
    ConfigChange,
    KafkaConfigStore,
    KafkaOffsetStore,
    KafkaStatusStore,
)
from moldau.connect.worker.states import State, TargetState
from moldau.connect.worker.worker_config import WorkerConfig

WORKER = WorkerConfig.parse({
    "bootstrap.servers": "127.0.0.1:9", "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
    "status.storage.topic": "s", "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter"}, standalone=False)


def _record(key: Any, value: Any) -> tuple[bytes, bytes | None]:
    raw_key = key.encode() if isinstance(key, str) else json.dumps(key).encode()
    return raw_key, None if value is None else json.dumps(value).encode()


def test_task_configs_take_effect_at_their_commit_and_tombstones_forget() -> None:
    changes: list[ConfigChange] = []
    store = KafkaConfigStore(WORKER, changes.append)
    records = [("connector-a", {"properties": {"name": "a", "connector.class": "FileStreamSource"}}),
               ("task-a-0", {"properties": {"file": "x"}}),
               ("task-a-1", {"properties": {"file": "y"}})]
    for offset, (key, value) in enumerate(records):
        store._apply(*_record(key, value), offset)
    assert store.connector("a") == {"name": "a", "connector.class": "FileStreamSource"}
    assert store.task_configs("a") == []  # not committed yet
    store._apply(*_record("commit-a", {"tasks": 2}), 3)
    assert store.task_configs("a") == [{"file": "x"}, {"file": "y"}] and store.task_counts() == {"a": 2}
    store._apply(*_record("target-state-a", {"state": "PAUSED", "state.v2": "STOPPED"}), 4)
    assert store.target_state("a") is TargetState.STOPPED
    store._apply(*_record("connector-a", None), 5)
    assert store.connector("a") is None and store.connectors() == [] and store.offset == 5
    assert [c.kind for c in changes] == ["connector", "tasks", "target", "removed"]


def test_offsets_are_keyed_by_connector_and_partition() -> None:
    store = KafkaOffsetStore(WORKER)
    store._apply(*_record(["src", {"filename": "in.txt"}], {"position": 12}), 0)
    store._apply(*_record(["other", {"filename": "in.txt"}], {"position": 99}), 1)
    assert store.get("src", {"filename": "in.txt"}) == {"position": 12}
    store._apply(*_record(["src", {"filename": "in.txt"}], None), 2)
    assert store.get("src", {"filename": "in.txt"}) is None and store.offsets("other") == [
        ({"filename": "in.txt"}, {"position": 99})]


def test_a_status_from_an_older_generation_on_another_worker_does_not_win() -> None:
    store = KafkaStatusStore(WORKER, lambda: 0)
    new = {"state": "RUNNING", "trace": None, "worker_id": "w2:8083", "generation": 7}
    stale = {"state": "FAILED", "trace": "boom", "worker_id": "w1:8083", "generation": 5}
    store._apply(*_record("status-task-a-0", new), 0)
    store._apply(*_record("status-task-a-0", stale), 1)
    assert store.tasks("a")[0].state is State.RUNNING
    store._apply(*_record("status-task-a-0", {**new, "state": "PAUSED"}), 2)
    assert store.tasks("a")[0].state is State.PAUSED
    store._apply(*_record("status-task-a-0", None), 3)
    assert store.tasks("a") == {}


GARBAGE: list[tuple[bytes | None, bytes | None]] = [
    (None, b"{}"), (b"", b""), (b"\xff\xfe", b"\x00"), (b"[1, 2, 3]", b"[]"), (b'"connector-"', b"null"),
    (b"connector-x", b'{"properties": 7}'), (b"task-x-notanumber", b'{"properties": {}}'),
    (b"commit-x", b'{"tasks": "many"}'), (b'["c", "not a dict"]', b'{"offset": 1}'),
    (b"status-task-x-1", b'{"state": 42}'), (b"[" * 100_000, b"]" * 100_000),
]


def test_records_that_are_not_kafka_connects_are_skipped_and_the_stores_go_on() -> None:
    """Another writer's bytes in an internal topic (truncated, wrong types, deep nesting) are skipped: the
    worker reading them keeps its state and goes on with the next record."""
    changes: list[ConfigChange] = []
    config, offsets, statuses = KafkaConfigStore(WORKER, changes.append), KafkaOffsetStore(WORKER), \
        KafkaStatusStore(WORKER, lambda: 0)
    for offset, (key, value) in enumerate(GARBAGE):
        for store in (config, offsets, statuses):
            store._apply(key, value, offset)
    assert config.connectors() == [] and offsets.offsets("c") == []
    config._apply(*_record("connector-a", {"properties": {"name": "a"}}), len(GARBAGE))
    offsets._apply(*_record(["src", {"f": 1}], {"position": 3}), len(GARBAGE))
    assert config.connector("a") == {"name": "a"} and offsets.get("src", {"f": 1}) == {"position": 3}


def test_topics_connectors_used_are_kafka_connect_s_records_and_reset_by_tombstones() -> None:
    """KIP-558: `topic-<topic>-connector-<name>` -> `{"topic": {...}}`; the names come from the value, since
    either may hold the key's separator, and a tombstone removes what its key's record named."""
    store = KafkaStatusStore(WORKER, lambda: 0)
    sent: list[tuple[bytes, bytes | None]] = []

    def send(key: bytes, value: bytes | None, flush: bool = True) -> None:
        sent.append((key, value))

    store.log.send = send  # type: ignore[method-assign]
    store.log.flush = lambda timeout_s=0.0: None  # type: ignore[method-assign]
    store.put_topic("my-connector-x", "a-connector-b", 0)
    key, value = sent[0]
    assert key == b"topic-a-connector-b-connector-my-connector-x"
    assert value is not None and json.loads(value)["topic"]["name"] == "a-connector-b"
    assert json.loads(value)["topic"]["connector"] == "my-connector-x" and json.loads(value)["topic"]["task"] == 0
    assert store.has_topic("my-connector-x", "a-connector-b") and store.topics("other") == set()
    replayed = KafkaStatusStore(WORKER, lambda: 0)  # another worker, reading the topic
    replayed._apply(key, value, 0)
    assert replayed.topics("my-connector-x") == {"a-connector-b"}
    store.reset_topics("my-connector-x")
    assert store.topics("my-connector-x") == set() and sent[-1] == (key, None)
    replayed._apply(key, None, 1)
    assert replayed.topics("my-connector-x") == set()
    replayed._apply(b"topic-x-connector-y", b'{"topic": 7}', 2)  # not a topic status: skipped
    assert replayed.topics("y") == set()
