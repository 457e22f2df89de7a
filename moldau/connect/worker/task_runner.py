"""What source and sink task threads share: one thread per task, pause/resume/stop signals from the herder,
and status reports (RUNNING, PAUSED, FAILED with the trace, UNASSIGNED once stopped)."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from moldau.connect.error_policy import ErrorPolicy, Stage
from moldau.connect.plugins import PluginRegistry
from moldau.connect.transforms.chain import TransformationChain, build_chain
from moldau.connect.worker.client_overrides import connector_settings
from moldau.connect.worker.error_handler import ErrorHandler
from moldau.connect.worker.plugin_setup import Converters, build_converters
from moldau.connect.worker.states import State, Status
from moldau.connect.worker.stores import StatusStore
from moldau.connect.worker.worker_config import WorkerConfig

__all__ = ["TaskRunner", "TaskSetup"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]
IDLE_WAIT_S = 0.1


class TaskSetup:
    """Everything a task thread needs from the worker."""

    def __init__(self, connector: str, task_id: int, connector_config: Mapping[str, str],
                 task_config: Mapping[str, str], worker: WorkerConfig, registry: PluginRegistry,
                 statuses: StatusStore, on_topic: Callable[[str], None], clock: Clock = time.monotonic) -> None:
        self.connector = connector
        self.task_id = task_id
        self.connector_config = dict(connector_config)
        self.task_config = dict(task_config)
        self.worker = worker
        self.registry = registry
        self.statuses = statuses
        self.on_topic = on_topic
        self.clock = clock

    @property
    def flush_interval_s(self) -> float:
        return float(self.worker.values["offset.flush.interval.ms"]) / 1000

    @property
    def flush_timeout_s(self) -> float:
        return float(self.worker.values["offset.flush.timeout.ms"]) / 1000

    def client_config(self, kind: str) -> dict[str, Any]:
        """librdkafka settings of the task's `producer`/`consumer`/`admin` client: the worker's connection and
        security settings, its `<kind>.*` configs, then the connector's `<kind>.override.*` ones."""
        return {**self.worker.client_config(kind), **connector_settings(kind, self.connector_config)}


def _qualified(plugin: object) -> str:
    return f"{type(plugin).__module__}.{type(plugin).__qualname__}"


def _class_names(converters: Converters, transforms: TransformationChain) -> dict[Stage, str]:
    return {Stage.KEY_CONVERTER: _qualified(converters.key), Stage.VALUE_CONVERTER: _qualified(converters.value),
            Stage.HEADER_CONVERTER: _qualified(converters.header), Stage.TRANSFORMATION: _qualified(transforms)}


class TaskRunner(threading.Thread, ABC):
    """Runs one task in its own thread until `stop`; a failure marks the task FAILED with its trace."""

    is_sink: ClassVar[bool] = False  # Kafka's dead letter queue exists for sink tasks only

    def __init__(self, setup: TaskSetup, paused: bool) -> None:
        super().__init__(name=f"connect-{setup.connector}-{setup.task_id}", daemon=True)
        self.setup = setup
        self.stopping = threading.Event()
        self.paused = threading.Event()
        if paused:
            self.paused.set()
        self.failed = False
        self.converters: Converters | None = None
        self.transforms: TransformationChain | None = None
        self.errors: ErrorHandler | None = None
        self._last_commit = setup.clock()

    def report(self, state: State, trace: str | None = None) -> None:
        self.setup.statuses.put_task(self.setup.connector, self.setup.task_id,
                                     Status(state, self.setup.worker.worker_id(), trace))

    def run(self) -> None:
        try:
            policy = ErrorPolicy(self.setup.connector_config, sink=self.is_sink)
            self.errors = ErrorHandler(policy, self.setup.connector, self.setup.task_id, self.setup.clock,
                                       self.stopping.wait)
            self.converters = build_converters(self.setup.registry, self.setup.worker, self.setup.connector_config)
            self.transforms = build_chain(self.setup.connector_config, self.setup.registry)
            self.errors.class_names = _class_names(self.converters, self.transforms)
            self.start_task()
            self.report(State.PAUSED if self.paused.is_set() else State.RUNNING)
            self.execute()
        except:  # noqa: E722 - also confluent-kafka's fatal errors, raised as KafkaError objects (no BaseException)
            trace = traceback.format_exc()
            if self.stopping.is_set():
                log.warning("connector %s task %d failed while stopping:\n%s", self.setup.connector,
                            self.setup.task_id, trace)
            else:
                log.error("connector %s task %d failed:\n%s", self.setup.connector, self.setup.task_id, trace)
                self.failed = True
                self.report(State.FAILED, trace)
        finally:
            self._shut_down()

    def _shut_down(self) -> None:
        try:
            self.close()
        except Exception:
            log.exception("connector %s task %d: closing failed", self.setup.connector, self.setup.task_id)
        finally:
            if self.transforms is not None:
                self.transforms.close()

    def commit_due(self) -> bool:
        now = self.setup.clock()
        if now - self._last_commit >= self.setup.flush_interval_s:
            self._last_commit = now
            return True
        return False

    def pause(self) -> None:
        self.paused.set()
        if not self.failed and self.is_alive():
            self.report(State.PAUSED)

    def resume(self) -> None:
        self.paused.clear()
        if not self.failed and self.is_alive():
            self.report(State.RUNNING)

    def stop(self) -> None:
        """Signal the thread to finish (it commits what it can and stops the task)."""
        self.stopping.set()

    def await_stop(self, timeout_s: float) -> bool:
        self.join(timeout_s)
        if self.is_alive():
            log.warning("connector %s task %d did not stop within %.1fs", self.setup.connector,
                        self.setup.task_id, timeout_s)
            return False
        return True

    @abstractmethod
    def start_task(self) -> None:
        """Create the client and call the task's `start`."""

    @abstractmethod
    def execute(self) -> None:
        """The main loop, until `stopping` is set."""

    @abstractmethod
    def close(self) -> None:
        """Final commit, stop the task, close the client. Runs whether or not the task failed."""
