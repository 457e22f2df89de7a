"""Where a worker keeps connector configs, source offsets and statuses, behind interfaces so that a
distributed worker can back them with the `config.storage.topic`, `offset.storage.topic` and
`status.storage.topic` topics. Standalone mode keeps configs and statuses in memory and source offsets in
`offset.storage.file.filename`.

Source offsets are keyed as Kafka keys them in its offsets topic: the connector name and the source partition;
the file holds JSON (`[[[connector, partition], offset], ...]`), written to a temporary file and renamed so a
crash never leaves it half written.
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moldau.connect.worker.states import Status, TargetState
from moldau.connect.worker.submitted import partition_key

__all__ = [
    "ConfigStore", "FileOffsetStore", "MemoryConfigStore", "MemoryOffsetStore", "MemoryStatusStore", "OffsetStore",
    "StatusStore",
]


class ConfigStore(ABC):
    """Connector configs, their target states and their task configs."""

    @abstractmethod
    def put_connector(self, name: str, config: Mapping[str, str]) -> None: ...

    @abstractmethod
    def remove_connector(self, name: str) -> None: ...

    @abstractmethod
    def connector(self, name: str) -> dict[str, str] | None: ...

    @abstractmethod
    def connectors(self) -> list[str]: ...

    @abstractmethod
    def put_target_state(self, name: str, target: TargetState) -> None: ...

    @abstractmethod
    def target_state(self, name: str) -> TargetState: ...

    @abstractmethod
    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None: ...

    @abstractmethod
    def task_configs(self, name: str) -> list[dict[str, str]]: ...


class MemoryConfigStore(ConfigStore):
    def __init__(self) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._targets: dict[str, TargetState] = {}
        self._tasks: dict[str, list[dict[str, str]]] = {}

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        self._configs[name] = dict(config)
        self._targets.setdefault(name, TargetState.STARTED)

    def remove_connector(self, name: str) -> None:
        self._configs.pop(name, None)
        self._targets.pop(name, None)
        self._tasks.pop(name, None)

    def connector(self, name: str) -> dict[str, str] | None:
        config = self._configs.get(name)
        return None if config is None else dict(config)

    def connectors(self) -> list[str]:
        return sorted(self._configs)

    def put_target_state(self, name: str, target: TargetState) -> None:
        self._targets[name] = target

    def target_state(self, name: str) -> TargetState:
        return self._targets.get(name, TargetState.STARTED)

    def put_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        self._tasks[name] = [dict(c) for c in configs]

    def task_configs(self, name: str) -> list[dict[str, str]]:
        return [dict(c) for c in self._tasks.get(name, [])]


class OffsetStore(ABC):
    """Committed source offsets by (connector, source partition). Thread-safe: task threads write."""

    @abstractmethod
    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None: ...

    @abstractmethod
    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        """Store offsets (partition key -> (partition, offset)); a None offset removes the partition's entry.
        Durable when this returns."""

    @abstractmethod
    def offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (partition, offset) of `connector`."""

    def refresh(self, timeout_s: float) -> None:  # noqa: B027 - optional: most stores have no other writer
        """Catch up with every offset other writers committed, waiting up to `timeout_s` for their open
        transactions to end (nothing to do where this worker is the only writer)."""


class MemoryOffsetStore(OffsetStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            found = self._data.get((connector, partition_key(partition)))
            return None if found is None else dict(found[1])

    def put(self, connector: str, offsets: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> None:
        with self._lock:
            for key, (partition, offset) in offsets.items():
                if offset is None:
                    self._data.pop((connector, key), None)
                else:
                    self._data[(connector, key)] = (dict(partition), dict(offset))
            self._persist()

    def offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        with self._lock:
            return [(dict(p), dict(o)) for (c, _), (p, o) in sorted(self._data.items()) if c == connector]

    def _persist(self) -> None:
        """Called with the lock held after every change; in memory there is nothing to do."""

    def _entries(self) -> list[Any]:
        return [[[c, p], o] for (c, _), (p, o) in sorted(self._data.items())]


class FileOffsetStore(MemoryOffsetStore):
    """Offsets in a JSON file (`offset.storage.file.filename`), rewritten atomically on every commit."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        if self.path.exists() and self.path.stat().st_size:
            for (connector, partition), offset in json.loads(self.path.read_text(encoding="utf-8")):
                self._data[(connector, partition_key(partition))] = (partition, offset)

    def _persist(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(self._entries(), file, separators=(",", ":"))
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)


class StatusStore(ABC):
    """Observed connector and task states, and the topics each connector has used (KIP-558). Thread-safe: task
    threads report."""

    @abstractmethod
    def put_connector(self, name: str, status: Status) -> None: ...

    @abstractmethod
    def put_task(self, name: str, task: int, status: Status) -> None: ...

    @abstractmethod
    def connector(self, name: str) -> Status | None: ...

    @abstractmethod
    def tasks(self, name: str) -> dict[int, Status]: ...

    @abstractmethod
    def remove_tasks(self, name: str, keep: int = 0) -> None:
        """Forget the statuses of task ids `keep` and above."""

    @abstractmethod
    def remove(self, name: str) -> None:
        """Forget the connector: its statuses and its topics."""

    @abstractmethod
    def put_topic(self, name: str, topic: str, task: int) -> None:
        """The connector's task `task` used `topic` (KIP-558's active topics)."""

    @abstractmethod
    def topics(self, name: str) -> set[str]: ...

    def has_topic(self, name: str, topic: str) -> bool:
        """Whether the topic is known as the connector's; cheap enough for every record."""
        return topic in self.topics(name)

    @abstractmethod
    def reset_topics(self, name: str) -> None: ...


class MemoryStatusStore(StatusStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[str, dict[int, Status]] = {}
        self._topics: dict[str, set[str]] = {}

    def put_connector(self, name: str, status: Status) -> None:
        with self._lock:
            self._connectors[name] = status

    def put_task(self, name: str, task: int, status: Status) -> None:
        with self._lock:
            self._tasks.setdefault(name, {})[task] = status

    def connector(self, name: str) -> Status | None:
        with self._lock:
            return self._connectors.get(name)

    def tasks(self, name: str) -> dict[int, Status]:
        with self._lock:
            return dict(sorted(self._tasks.get(name, {}).items()))

    def remove_tasks(self, name: str, keep: int = 0) -> None:
        with self._lock:
            tasks = self._tasks.get(name, {})
            for task in [t for t in tasks if t >= keep]:
                del tasks[task]

    def remove(self, name: str) -> None:
        with self._lock:
            self._connectors.pop(name, None)
            self._tasks.pop(name, None)
            self._topics.pop(name, None)

    def put_topic(self, name: str, topic: str, task: int) -> None:
        with self._lock:
            self._topics.setdefault(name, set()).add(topic)

    def topics(self, name: str) -> set[str]:
        with self._lock:
            return set(self._topics.get(name, ()))

    def has_topic(self, name: str, topic: str) -> bool:
        return topic in self._topics.get(name, ())  # a read under the GIL, without the lock

    def reset_topics(self, name: str) -> None:
        with self._lock:
            self._topics.pop(name, None)
