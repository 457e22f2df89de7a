"""The config, offset and status stores of a distributed worker, each kept in a compacted topic with Kafka
Connect's keys and JSON values (so tools that read Kafka's topics read Moldau's):

- `config.storage.topic` (one partition): `connector-<name>` -> `{"properties": {...}}`, `task-<name>-<n>` ->
  `{"properties": {...}}`, `commit-<name>` -> `{"tasks": N}` (task configs take effect only once committed),
  `target-state-<name>` -> `{"state": "PAUSED"}` (STOPPED as `{"state": "PAUSED", "state.v2": "STOPPED"}`, as
  Kafka writes it for older readers); deleting a connector writes tombstones for its connector and target-state
  keys; `session-key` -> `{"key", "algorithm", "creation-timestamp"}`, the leader's latest session key
  (`connect.protocol=sessioned`, see `request_signing`).
- `offset.storage.topic`: `["<connector>", {partition}]` -> the offset's JSON (a tombstone removes it).
- `status.storage.topic`: `status-connector-<name>` and `status-task-<name>-<n>` ->
  `{"state", "trace", "worker_id", "generation"}`; a status from an older generation on another worker does not
  replace a newer one. `topic-<topic>-connector-<name>` -> `{"topic": {"name", "connector", "task",
  "discoverTimestamp"}}`: a topic the connector used (KIP-558), a tombstone when its topics are reset.

Each store applies records on its log's consumer thread; a change of config is also handed to `on_change`,
which must not block (the herder queues it).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.connect.distributed.kafka_log import KafkaLog
from moldau.connect.distributed.request_signing import SESSION_KEY_RECORD, SessionKey
from moldau.connect.worker.states import State, Status, TargetState
from moldau.connect.worker.stores import ConfigStore, MemoryOffsetStore, StatusStore
from moldau.connect.worker.submitted import partition_key
from moldau.connect.worker.worker_config import WorkerConfig, exactly_once_source
from moldau.text import ascii_digits

__all__ = ["ConfigChange", "KafkaConfigStore", "KafkaOffsetStore", "KafkaStatusStore", "offset_record", "open_log"]

log = logging.getLogger(__name__)

CONNECTOR, TASK, COMMIT, TARGET = "connector-", "task-", "commit-", "target-state-"


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(raw: bytes | None) -> Any:
    """A record's JSON, None for a tombstone; ValueError for anything else another writer may have put in the
    topic (not JSON, not UTF-8, or nested too deeply to parse)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc


def open_log(worker: WorkerConfig, kind: str, callback: Callable[[bytes | None, bytes | None, int], None]) -> KafkaLog:
    """The log of `config`, `offset` or `status` from the worker's `<kind>.storage.*` configs."""
    partitions = 1 if kind == "config" else int(worker.values[f"{kind}.storage.partitions"])
    # KIP-618: once tasks write offsets in transactions, only committed ones may ever be restored.
    read_committed = kind == "offset" and exactly_once_source(worker) != "disabled"
    return KafkaLog(worker, worker.values[f"{kind}.storage.topic"], partitions,
                    int(worker.values[f"{kind}.storage.replication.factor"]), callback, read_committed)


@dataclass(frozen=True)
class ConfigChange:
    """What a config record changed: `kind` is connector, removed, tasks or target; `name` the connector."""

    kind: str
    name: str


class KafkaConfigStore(ConfigStore):
    def __init__(self, worker: WorkerConfig, on_change: Callable[[ConfigChange], None]) -> None:
        self.on_change = on_change
        self.lock = threading.Lock()
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._tasks: dict[str, list[dict[str, str]]] = {}
        self._pending: dict[str, dict[int, dict[str, str]]] = {}
        self.offset = -1  # the offset of the last record applied (Kafka's config offset)
        self.commits: dict[str, int] = {}  # connector -> offset of its last task config commit
        self._session_key: SessionKey | None = None
        self.log = open_log(worker, "config", self._apply)

    # --- writes (durable and read back when they return) ----------------------------------------------

    def _write(self, records: list[tuple[str, Any]]) -> None:
        for key, value in records:
            self.log.send(key.encode(), None if value is None else _json(value), flush=False)
        self.log.flush()
        self.log.read_to_end()

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        self._write([(CONNECTOR + name, {"properties": dict(config)})])

    def remove_connector(self, name: str) -> None:
        self._write([(CONNECTOR + name, None), (TARGET + name, None)])

    def put_target_state(self, name: str, target: TargetState) -> None:
        value = {"state": "PAUSED", "state.v2": "STOPPED"} if target is TargetState.STOPPED else \
            {"state": target.value}
        self._write([(TARGET + name, value)])

    def put_session_key(self, key: SessionKey) -> None:
        self._write([(SESSION_KEY_RECORD, key.record())])

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        records: list[tuple[str, Any]] = [(f"{TASK}{name}-{i}", {"properties": c}) for i, c in enumerate(configs)]
        self._write([*records, (COMMIT + name, {"tasks": len(configs)})])

    # --- reads ------------------------------------------------------------------------------------------

    def connector(self, name: str) -> dict[str, str] | None:
        with self.lock:
            config = self._configs.get(name)
            return None if config is None else dict(config)

    def connectors(self) -> list[str]:
        with self.lock:
            return sorted(self._configs)

    def target_state(self, name: str) -> TargetState:
        with self.lock:
            return self._targets.get(name, TargetState.STARTED)

    def task_configs(self, name: str) -> list[dict[str, str]]:
        with self.lock:
            return [dict(c) for c in self._tasks.get(name, [])]

    @property
    def session_key(self) -> SessionKey | None:
        """The latest session key read from the topic."""
        with self.lock:
            return self._session_key

    def task_counts(self) -> dict[str, int]:
        """Every configured connector's committed task count (for the assignor)."""
        with self.lock:
            return {name: len(self._tasks.get(name, [])) for name in self._configs}

    # --- the consumer thread ----------------------------------------------------------------------------

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None, offset: int) -> None:
        key = (raw_key or b"").decode(errors="replace")
        try:
            value = _load(raw_value)
            if value is not None and not isinstance(value, dict):
                raise ValueError("not a JSON object")
            with self.lock:
                # Each branch reads the whole value before it changes anything, so a malformed one changes nothing.
                change = self._apply_locked(key, value)
                self.offset = offset
                if change is not None and change.kind == "tasks":
                    self.commits[change.name] = offset
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("connect: config record %s at %d is not Kafka Connect's (%s); skipped", key, offset, exc)
            return
        if change is not None:
            self.on_change(change)

    def _apply_locked(self, key: str, value: Any) -> ConfigChange | None:
        if key == SESSION_KEY_RECORD:
            if value is not None:
                self._session_key = SessionKey.from_record(value)
                log.info("connect: session key updated (created at %d)", self._session_key.created_ms)
            return None
        if key.startswith(CONNECTOR):
            name = key[len(CONNECTOR):]
            if value is None:
                self._configs.pop(name, None)
                self._targets.pop(name, None)
                self._tasks.pop(name, None)
                self._pending.pop(name, None)
                return ConfigChange("removed", name)
            self._configs[name] = {str(k): str(v) for k, v in value.get("properties", {}).items()}
            return ConfigChange("connector", name)
        if key.startswith(TARGET):
            name = key[len(TARGET):]
            if value is None:
                self._targets.pop(name, None)
                return None
            self._targets[name] = TargetState(value.get("state.v2") or value.get("state", "STARTED"))
            return ConfigChange("target", name)
        if key.startswith(COMMIT):
            name = key[len(COMMIT):]
            count = int(value.get("tasks", 0)) if value else 0
            pending = self._pending.pop(name, {})
            previous = self._tasks.get(name, [])
            self._tasks[name] = [pending.get(i) or (previous[i] if i < len(previous) else {}) for i in range(count)]
            return ConfigChange("tasks", name)
        if key.startswith(TASK) and value is not None:
            name, _, number = key[len(TASK):].rpartition("-")
            if ascii_digits(number):
                self._pending.setdefault(name, {})[int(number)] = {
                    str(k): str(v) for k, v in value.get("properties", {}).items()}
        return None


def offset_record(connector: str, partition: Mapping[str, Any], offset: Mapping[str, Any] | None
                  ) -> tuple[bytes, bytes | None]:
    """The key and value of a source offset in `offset.storage.topic` (None: a tombstone)."""
    return _json([connector, dict(partition)]), None if offset is None else _json(dict(offset))


class KafkaOffsetStore(MemoryOffsetStore):
    """Source offsets in `offset.storage.topic`; `put` returns once the brokers acknowledged every record. With
    exactly-once source support the topic is read read_committed, so offsets of aborted transactions are never
    seen, and tasks also write their offsets there in their own transactions (see `worker.exactly_once`)."""

    def __init__(self, worker: WorkerConfig) -> None:
        super().__init__()
        self.log = open_log(worker, "offset", self._apply)

    @property
    def topic(self) -> str:
        return self.log.topic

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        for partition, offset in offsets.values():
            self.log.send(*offset_record(connector, partition, offset), flush=False)
        self.log.flush()
        super().put(connector, offsets)

    def refresh(self, timeout_s: float) -> None:
        # Up to the high watermark: an older transaction still open (a sibling task's, left by a crash) would
        # otherwise hide offsets committed after it began.
        self.log.read_to_end(timeout_s, decided=True)

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None, offset: int) -> None:
        try:
            connector, partition = _load(raw_key)
            value = _load(raw_value)
        except (ValueError, TypeError):
            log.warning("connect: offset record at %d is not [connector, partition] JSON; skipped", offset)
            return
        if not isinstance(connector, str) or not isinstance(partition, dict):
            return
        with self._lock:
            if value is None:
                self._data.pop((connector, partition_key(partition)), None)
            elif isinstance(value, dict):
                self._data[(connector, partition_key(partition))] = (partition, value)


class KafkaStatusStore(StatusStore):
    """Statuses in `status.storage.topic`, written without waiting; the local view is updated at once."""

    def __init__(self, worker: WorkerConfig, generation: Callable[[], int]) -> None:
        self.generation = generation
        self.lock = threading.Lock()
        self._connectors: dict[str, tuple[Status, int]] = {}
        self._tasks: dict[str, dict[int, tuple[Status, int]]] = {}
        self._topics: dict[str, set[str]] = {}  # KIP-558: per connector, the topics it used
        self._topic_keys: dict[str, tuple[str, str]] = {}  # a topic record's key -> (connector, topic)
        self.log = open_log(worker, "status", self._apply)

    def _send(self, key: str, status: Status | None) -> None:
        value = None if status is None else _json({"state": status.state.value, "trace": status.trace,
                                                   "worker_id": status.worker_id, "generation": self.generation()})
        self.log.send(key.encode(), value, flush=False)

    def put_connector(self, name: str, status: Status) -> None:
        with self.lock:
            self._connectors[name] = (status, self.generation())
        self._send(f"status-connector-{name}", status)

    def put_task(self, name: str, task: int, status: Status) -> None:
        with self.lock:
            self._tasks.setdefault(name, {})[task] = (status, self.generation())
        self._send(f"status-task-{name}-{task}", status)

    def connector(self, name: str) -> Status | None:
        with self.lock:
            found = self._connectors.get(name)
            return None if found is None else found[0]

    def tasks(self, name: str) -> dict[int, Status]:
        with self.lock:
            return {t: s for t, (s, _) in sorted(self._tasks.get(name, {}).items())}

    def remove_tasks(self, name: str, keep: int = 0) -> None:
        with self.lock:
            gone = [t for t in self._tasks.get(name, {}) if t >= keep]
            for task in gone:
                del self._tasks[name][task]
        for task in gone:
            self._send(f"status-task-{name}-{task}", None)

    def remove(self, name: str) -> None:
        self.remove_tasks(name)
        with self.lock:
            self._connectors.pop(name, None)
            self._tasks.pop(name, None)
        self._send(f"status-connector-{name}", None)
        self.reset_topics(name)

    def put_topic(self, name: str, topic: str, task: int) -> None:
        with self.lock:
            self._topics.setdefault(name, set()).add(topic)
        value = _json({"topic": {"name": topic, "connector": name, "task": task,
                                 "discoverTimestamp": int(time.time() * 1000)}})
        self.log.send(_topic_key(name, topic).encode(), value, flush=False)

    def topics(self, name: str) -> set[str]:
        with self.lock:
            return set(self._topics.get(name, ()))

    def has_topic(self, name: str, topic: str) -> bool:
        return topic in self._topics.get(name, ())  # a read under the GIL, without the lock: once per record

    def reset_topics(self, name: str) -> None:
        with self.lock:
            gone = self._topics.pop(name, set())
        for topic in sorted(gone):
            self.log.send(_topic_key(name, topic).encode(), None, flush=False)
        self.log.flush()

    def _apply(self, raw_key: bytes | None, raw_value: bytes | None, offset: int) -> None:
        key = (raw_key or b"").decode(errors="replace")
        if key.startswith(TOPIC_PREFIX):
            self._apply_topic(key, raw_value, offset)
            return
        try:
            value = _load(raw_value)
            status = None if value is None else (Status(State(value["state"]), str(value.get("worker_id", "")),
                                                        value.get("trace")), int(value.get("generation", -1)))
        except (ValueError, KeyError, TypeError):
            log.warning("connect: status record %s at %d is not a status; skipped", key, offset)
            return
        with self.lock:
            if key.startswith("status-connector-"):
                _update(self._connectors, key[len("status-connector-"):], status)
            elif key.startswith("status-task-"):
                name, _, number = key[len("status-task-"):].rpartition("-")
                if ascii_digits(number):
                    _update(self._tasks.setdefault(name, {}), int(number), status)


    def _apply_topic(self, key: str, raw_value: bytes | None, offset: int) -> None:
        """A topic record: its value names the connector and the topic, since either name may hold the key's
        `-connector-` separator; a tombstone removes what the record of its key named."""
        with self.lock:
            if raw_value is None:
                named = self._topic_keys.pop(key, None)
                if named is not None:
                    self._topics.get(named[0], set()).discard(named[1])
                return
        try:
            value = _load(raw_value)["topic"]
            name, topic = str(value["connector"]), str(value["name"])
        except (ValueError, KeyError, TypeError):
            log.warning("connect: topic status record %s at %d is not a topic status; skipped", key, offset)
            return
        with self.lock:
            self._topic_keys[key] = (name, topic)
            self._topics.setdefault(name, set()).add(topic)


TOPIC_PREFIX = "topic-"


def _topic_key(name: str, topic: str) -> str:
    """Kafka Connect's key of a topic status record."""
    return f"{TOPIC_PREFIX}{topic}-connector-{name}"


def _update(table: dict[Any, tuple[Status, int]], key: Any, status: tuple[Status, int] | None) -> None:
    """Kafka's rule: a status from another worker with an older generation than the one held is stale."""
    if status is None:
        table.pop(key, None)
        return
    held = table.get(key)
    if held is not None and held[0].worker_id != status[0].worker_id and held[1] > status[1]:
        return
    table[key] = status
