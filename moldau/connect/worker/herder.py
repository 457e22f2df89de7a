"""The herder: owns every connector on this worker and carries out what the REST API and the command line ask
(create, reconfigure, pause, resume, stop, restart, delete) against the config, offset and status stores.

Its methods block (they start and stop connectors and join task threads), so the REST API calls them in a
thread; one lock serializes them. Errors are `HerderError`s carrying the HTTP status Kafka Connect answers
with (400 bad config, 404 unknown connector or task, 409 conflict).
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.connect.api import Connector, ConnectorContext, SinkConnector, SinkTask, SourceConnector, SourceTask
from moldau.connect.config import ConfigType, ConfigValue, config_infos
from moldau.connect.errors import ConfigException, NotFoundError
from moldau.connect.plugins import PluginInfo, PluginRegistry
from moldau.connect.worker.client_overrides import OVERRIDE_POLICY, override_errors, parse_policy
from moldau.connect.worker.exactly_once import validate_exactly_once
from moldau.connect.worker.sink_runner import SinkTaskRunner
from moldau.connect.worker.source_runner import SourceTaskRunner
from moldau.connect.worker.states import State, Status, TargetState, restart_plan
from moldau.connect.worker.stores import ConfigStore, OffsetStore, StatusStore
from moldau.connect.worker.submitted import partition_key
from moldau.connect.worker.task_runner import TaskRunner, TaskSetup
from moldau.connect.worker.worker_config import (
    CONNECTOR_CLASS,
    NAME,
    TASKS_MAX,
    TOPIC_TRACKING,
    TOPIC_TRACKING_RESET,
    WorkerConfig,
    connector_config_def,
    exactly_once_source,
    sink_config_def,
    source_config_def,
)

__all__ = ["Herder", "HerderError", "RequestTargetError"]

log = logging.getLogger(__name__)

TASK_CLASS = "task.class"


class HerderError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


REBALANCE_MESSAGE = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"


class RequestTargetError(HerderError):
    """Another worker must handle this request (in distributed mode: the leader, or the worker running the
    task); the REST API forwards it there once, as Kafka Connect does."""

    def __init__(self, url: str) -> None:
        super().__init__(409, REBALANCE_MESSAGE)
        self.url = url


@dataclass
class _Running:
    """A connector instance on this worker and its task threads."""

    plugin: PluginInfo
    connector: Connector | None = None
    tasks: dict[int, TaskRunner] = field(default_factory=dict)


class _Context(ConnectorContext):
    def __init__(self, herder: Herder, name: str) -> None:
        self.herder = herder
        self.name = name

    def request_task_reconfiguration(self) -> None:
        threading.Thread(target=self.herder.reconfigure_tasks, args=(self.name,), daemon=True).start()

    def raise_error(self, error: BaseException) -> None:
        trace = "".join(traceback.format_exception(error))
        self.herder.statuses.put_connector(self.name, Status(State.FAILED, self.herder.worker_id, trace))


class Herder:
    def __init__(self, worker: WorkerConfig, registry: PluginRegistry, configs: ConfigStore, offsets: OffsetStore,
                 statuses: StatusStore) -> None:
        self.worker = worker
        self.registry = registry
        self.configs = configs
        self.offsets = offsets
        self.statuses = statuses
        self.worker_id = worker.worker_id()
        self.lock = threading.RLock()
        self.running: dict[str, _Running] = {}

    # --- validation -----------------------------------------------------------------------------------

    def plugin_for(self, config: Mapping[str, str]) -> PluginInfo:
        name = config.get(CONNECTOR_CLASS, "").strip()
        if not name:
            raise HerderError(400, f'Missing required configuration "{CONNECTOR_CLASS}" which has no default value.')
        try:
            return self.registry.connector(name)
        except NotFoundError as exc:
            known = ", ".join(i.class_name for i in self.registry.plugins())
            raise HerderError(400, f"{exc}, available connectors are: {known}") from None

    def validate(self, config: Mapping[str, str]) -> dict[str, Any]:
        """Kafka's ConfigInfos for `config`: the common connector configs and the connector's own."""
        plugin = self.plugin_for(config)
        connector: Connector = plugin.cls()  # type: ignore[assignment]
        sink = issubclass(plugin.cls, SinkConnector)
        common = sink_config_def() if sink else source_config_def() if issubclass(plugin.cls, SourceConnector) \
            else connector_config_def()
        own = connector.config_def()
        definition = common.merge(own)
        values = common.validate(config) + connector.validate(config)
        values += self._validate_plugins(config)
        values += override_errors(parse_policy(self.worker.values.get(OVERRIDE_POLICY)), config)
        if sink:
            values += _validate_sink_topics(config)
        elif isinstance(connector, SourceConnector):
            values += validate_exactly_once(connector, config, exactly_once_source(self.worker))
        merged = {v.name: v for v in values if v.name in definition.keys}
        for extra in (v for v in values if v.name not in definition.keys):
            definition.define(extra.name, ConfigType.STRING, None, documentation="")
            merged[extra.name] = extra
        return config_infos(plugin.class_name, definition, [_combine(merged, v.name, values) for v in
                                                             merged.values()])

    def _validate_plugins(self, config: Mapping[str, str]) -> list[ConfigValue]:
        from moldau.connect.transforms.chain import build_chain
        from moldau.connect.worker.plugin_setup import build_converters
        results = []
        for check in (lambda: build_chain(config, self.registry),
                      lambda: build_converters(self.registry, self.worker, config)):
            try:
                check()
            except ConfigException as exc:
                results.append(ConfigValue(exc.name, config.get(exc.name), errors=[str(exc)]))
        return results

    def _check_valid(self, config: Mapping[str, str]) -> PluginInfo:
        infos = self.validate(config)
        if infos["error_count"]:
            errors = [f"{c['value']['name']}: {error}" for c in infos["configs"] for error in c["value"]["errors"]]
            connector_type = config.get(CONNECTOR_CLASS, "")
            raise HerderError(400, f"Connector configuration is invalid and contains the following "
                                   f"{len(errors)} error(s):\n" + "\n".join(errors) + "\nYou can also find the "
                                   f"above list of errors at the endpoint `/connector-plugins/{connector_type}"
                                   f"/config/validate`")
        return self.plugin_for(config)

    # --- lifecycle ------------------------------------------------------------------------------------

    def put_connector(self, name: str, config: Mapping[str, str], allow_replace: bool) -> bool:
        """Create (True) or, with `allow_replace`, reconfigure (False) connector `name`."""
        config = {**config, NAME: name}
        with self.lock:
            exists = self.configs.connector(name) is not None
            if exists and not allow_replace:
                raise HerderError(409, f"Connector {name} already exists")
            plugin = self._check_valid(config)
            if exists:
                self._stop_connector(name)
            self.configs.put_connector(name, config)
            self.running[name] = _Running(plugin)
            self._start_connector(name)
            return not exists

    def _require(self, name: str) -> dict[str, str]:
        config = self.configs.connector(name)
        if config is None:
            raise HerderError(404, f"Connector {name} not found")
        return config

    def _start_connector(self, name: str) -> None:
        """Start the connector instance and, unless STOPPED, its tasks (new task configs from it)."""
        if self._start_instance(name):
            self._start_tasks(name)

    def _start_instance(self, name: str) -> bool:
        """Start a new Connector instance and store its task configs; False if STOPPED or it failed."""
        config = self._require(name)
        target = self.configs.target_state(name)
        running = self.running.setdefault(name, _Running(self.plugin_for(config)))
        if target is TargetState.STOPPED:
            self.statuses.put_connector(name, Status(State.STOPPED, self.worker_id))
            return False
        try:
            connector: Connector = running.plugin.cls()  # type: ignore[assignment]
            connector.initialize(_Context(self, name))
            connector.start(config)
            running.connector = connector
            task_configs = [{**c, TASK_CLASS: _qualified(connector.task_class())}
                            for c in connector.task_configs(int(config.get(TASKS_MAX, "1")))]
        except Exception:
            self.statuses.put_connector(name, Status(State.FAILED, self.worker_id, traceback.format_exc()))
            return False
        state = State.PAUSED if target is TargetState.PAUSED else State.RUNNING
        self.statuses.put_connector(name, Status(state, self.worker_id))
        self._publish_task_configs(name, task_configs)
        return True

    def _publish_task_configs(self, name: str, task_configs: list[dict[str, str]]) -> None:
        """Store the task configs a connector generated (distributed mode: through the leader)."""
        self.configs.put_task_configs(name, task_configs)

    def _start_tasks(self, name: str) -> None:
        count = len(self.configs.task_configs(name))
        self.statuses.remove_tasks(name, keep=count)
        for task_id in range(count):
            self._start_task(name, task_id)

    def _start_task(self, name: str, task_id: int) -> None:
        connector_config = self._require(name)
        # In distributed mode a task may run on a worker that does not run its connector.
        running = self.running.setdefault(name, _Running(self.plugin_for(connector_config)))
        task_config = self.configs.task_configs(name)[task_id]
        paused = self.configs.target_state(name) is TargetState.PAUSED
        setup = TaskSetup(name, task_id, connector_config, task_config, self.worker, self.registry, self.statuses,
                          self._topic_tracker(name, task_id))
        self.statuses.put_task(name, task_id, Status(State.UNASSIGNED, self.worker_id))
        connector: Connector = running.connector or running.plugin.cls()  # type: ignore[assignment]
        task = connector.task_class()()
        runner: TaskRunner
        if isinstance(task, SourceTask):
            runner = self._source_runner(setup, task, paused)
        elif isinstance(task, SinkTask):
            runner = SinkTaskRunner(setup, task, paused)
        else:
            raise HerderError(500, f"{type(task).__name__} is neither a SourceTask nor a SinkTask")
        running.tasks[task_id] = runner
        runner.start()

    def _source_runner(self, setup: TaskSetup, task: SourceTask, paused: bool) -> SourceTaskRunner:
        """The thread of a source task; standalone mode has no exactly-once delivery (as in Kafka)."""
        return SourceTaskRunner(setup, task, self.offsets, paused)

    def _stop_tasks(self, name: str, task_ids: list[int] | None = None) -> None:
        running = self.running.get(name)
        if running is None:
            return
        chosen = list(running.tasks) if task_ids is None else [t for t in task_ids if t in running.tasks]
        runners = [running.tasks.pop(t) for t in chosen]
        for runner in runners:
            runner.stop()
        timeout_s = float(self.worker.values["task.shutdown.graceful.timeout.ms"]) / 1000
        for runner in runners:
            runner.await_stop(timeout_s)

    def _stop_connector(self, name: str) -> None:
        self._stop_tasks(name)
        running = self.running.get(name)
        if running is not None and running.connector is not None:
            try:
                running.connector.stop()
            except Exception:
                log.exception("connector %s: stop() failed", name)
            running.connector = None

    def reconfigure_tasks(self, name: str) -> None:
        """Ask the connector for task configs again; restart the tasks if they changed."""
        with self.lock:
            running = self.running.get(name)
            config = self.configs.connector(name)
            if running is None or running.connector is None or config is None:
                return
            fresh = [{**c, TASK_CLASS: _qualified(running.connector.task_class())}
                     for c in running.connector.task_configs(int(config.get(TASKS_MAX, "1")))]
            if fresh != self.configs.task_configs(name) or not running.tasks:
                self._stop_tasks(name)
                self.configs.put_task_configs(name, fresh)
                self._start_tasks(name)

    def pause(self, name: str) -> None:
        with self.lock:
            self._require(name)
            if self.configs.target_state(name) is TargetState.STOPPED:
                return  # Kafka leaves a stopped connector stopped
            self.configs.put_target_state(name, TargetState.PAUSED)
            self._set_connector_state(name, State.PAUSED)
            running = self.running.get(name)
            for runner in running.tasks.values() if running else ():
                runner.pause()

    def resume(self, name: str) -> None:
        with self.lock:
            self._require(name)
            previous = self.configs.target_state(name)
            self.configs.put_target_state(name, TargetState.STARTED)
            if previous is TargetState.STOPPED:
                self._start_connector(name)
                return
            self._set_connector_state(name, State.RUNNING)
            running = self.running.get(name)
            for runner in running.tasks.values() if running else ():
                runner.resume()

    def stop(self, name: str) -> None:
        with self.lock:
            self._require(name)
            self.configs.put_target_state(name, TargetState.STOPPED)
            self._stop_connector(name)
            self.configs.put_task_configs(name, [])
            self.statuses.remove_tasks(name)
            self.statuses.put_connector(name, Status(State.STOPPED, self.worker_id))

    def _set_connector_state(self, name: str, state: State) -> None:
        current = self.statuses.connector(name)
        if current is not None and current.state is not State.FAILED:
            self.statuses.put_connector(name, Status(state, self.worker_id))

    def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """Restart per KIP-745. Returns the status with what is restarted marked RESTARTING (202), or None
        when only the connector was asked for (Kafka answers 204)."""
        with self.lock:
            self._require(name)
            connector_status = self.statuses.connector(name) or Status(State.UNASSIGNED, self.worker_id)
            plan = restart_plan(connector_status, self.statuses.tasks(name), include_tasks, only_failed)
            answer = self.status(name)
            if plan.connector:
                answer["connector"]["state"] = State.RESTARTING.value
                answer["connector"].pop("trace", None)
            for task in answer["tasks"]:
                if task["id"] in plan.tasks:
                    task["state"] = State.RESTARTING.value
                    task.pop("trace", None)
            if plan.connector:
                self._restart_connector_only(name)
            for task_id in plan.tasks:
                self._restart_task(name, task_id)
            return answer if include_tasks or only_failed else None

    def _restart_connector_only(self, name: str) -> None:
        """A new Connector instance; its tasks keep running unless their configs changed (or none run)."""
        running = self.running[name]
        if running.connector is not None:
            try:
                running.connector.stop()
            except Exception:
                log.exception("connector %s: stop() failed", name)
            running.connector = None
        previous = self.configs.task_configs(name)
        if not self._start_instance(name):
            return
        if self.configs.task_configs(name) != previous or not running.tasks:
            self._stop_tasks(name)
            self._start_tasks(name)

    def restart_task(self, name: str, task_id: int) -> None:
        with self.lock:
            self._require(name)
            if task_id not in self.statuses.tasks(name) or task_id >= len(self.configs.task_configs(name)):
                raise HerderError(404, f"Task {name}-{task_id} not found")
            self._restart_task(name, task_id)

    def _restart_task(self, name: str, task_id: int) -> None:
        self._stop_tasks(name, [task_id])
        if self.running[name].connector is not None:
            self._start_task(name, task_id)

    def delete(self, name: str) -> None:
        with self.lock:
            self._require(name)
            self._stop_connector(name)
            self.configs.remove_connector(name)
            self.statuses.remove(name)
            self.running.pop(name, None)

    def stop_all(self) -> None:
        with self.lock:
            for name in list(self.running):
                self._stop_connector(name)

    # --- reads ----------------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        return self.configs.connectors()

    def connector_type(self, name: str) -> str:
        return self.plugin_for(self._require(name)).type

    def info(self, name: str) -> dict[str, Any]:
        config = self._require(name)
        tasks = [{"connector": name, "task": t} for t in range(len(self.configs.task_configs(name)))]
        return {"name": name, "config": config, "tasks": tasks, "type": self.connector_type(name)}

    def config(self, name: str) -> dict[str, str]:
        return self._require(name)

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        return [{"id": {"connector": name, "task": t}, "config": c}
                for t, c in enumerate(self.configs.task_configs(name))]

    def status(self, name: str) -> dict[str, Any]:
        self._require(name)
        connector = self.statuses.connector(name) or Status(State.UNASSIGNED, self.worker_id)
        tasks = [{"id": t, **s.json()} for t, s in self.statuses.tasks(name).items()]
        return {"name": name, "connector": connector.json(), "tasks": tasks, "type": self.connector_type(name)}

    def task_status(self, name: str, task_id: int) -> dict[str, Any]:
        self._require(name)
        status = self.statuses.tasks(name).get(task_id)
        if status is None:
            raise HerderError(404, f"No status found for task {name}-{task_id}")
        return {"id": task_id, **status.json()}

    def _topic_tracker(self, name: str, task_id: int) -> Callable[[str], None]:
        """What a task calls with the topic of each record it produces or consumes: the first use of a topic is
        recorded (KIP-558), as the status store holds it, so that any worker answers, also after a restart."""
        if not self.worker.values[TOPIC_TRACKING]:
            return lambda topic: None
        statuses = self.statuses

        def used(topic: str) -> None:
            if not statuses.has_topic(name, topic):
                statuses.put_topic(name, topic, task_id)
        return used

    def topics(self, name: str) -> list[str]:
        self._require(name)
        if not self.worker.values[TOPIC_TRACKING]:
            raise HerderError(400, "Topic tracking is disabled.")
        return sorted(self.statuses.topics(name))

    def reset_topics(self, name: str) -> None:
        self._require(name)
        if not self.worker.values[TOPIC_TRACKING]:
            raise HerderError(400, "Topic tracking is disabled.")
        if not self.worker.values[TOPIC_TRACKING_RESET]:
            raise HerderError(400, "Topic tracking reset is disabled.")
        self.statuses.reset_topics(name)

    def _require_stopped(self, name: str) -> None:
        self._require(name)
        if self.configs.target_state(name) is not TargetState.STOPPED:
            raise HerderError(400, "Connectors must be in the STOPPED state before their offsets can be modified. "
                                   "This can be done for the specified connector by issuing a 'PUT' request to the "
                                   f"'/connectors/{name}/stop' endpoint")

    def alter_offsets(self, name: str, entries: list[Any]) -> None:
        """KIP-875's PATCH: source partitions get the given offsets (null removes one); sink partitions
        (`kafka_topic`, `kafka_partition`) get `kafka_offset`, or (null) lose their committed offset."""
        from moldau.connect.worker.offsets_admin import alter_sink_offsets, delete_sink_offsets
        with self.lock:
            self._require_stopped(name)
            if self.connector_type(name) == "sink":
                offsets = [_sink_offset(entry) for entry in entries]
                alter_sink_offsets(self.worker, name, [(t, p, o) for t, p, o in offsets if o is not None])
                delete_sink_offsets(self.worker, name, [(t, p) for t, p, o in offsets if o is None])
                return
            changes: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
            for entry in entries:
                partition, offset = _entry(entry)
                if offset is not None and not isinstance(offset, dict):
                    raise HerderError(400, "A source offset must be a JSON object or null")
                changes[partition_key(partition)] = (partition, offset)
            self.offsets.put(name, changes)

    def reset_offsets(self, name: str) -> None:
        """KIP-875's DELETE: forget every committed offset of the connector."""
        from moldau.connect.worker.offsets_admin import reset_sink_offsets
        with self.lock:
            self._require_stopped(name)
            if self.connector_type(name) == "sink":
                reset_sink_offsets(self.worker, name)
                return
            self.offsets.put(name, {partition_key(p): (p, None) for p, _ in self.offsets.offsets(name)})

    def source_offsets(self, name: str) -> list[dict[str, Any]]:
        self._require(name)
        return [{"partition": p, "offset": o} for p, o in self.offsets.offsets(name)]


def _entry(entry: Any) -> tuple[dict[str, Any], Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("partition"), dict) or "offset" not in entry:
        raise HerderError(400, "Each offset must be an object with a partition (an object) and an offset")
    return entry["partition"], entry["offset"]


def _sink_offset(entry: Any) -> tuple[str, int, int | None]:
    """(topic, partition, offset); offset None resets the partition (its committed offset is deleted)."""
    partition, offset = _entry(entry)
    topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
    if not isinstance(topic, str) or not isinstance(number, int):
        raise HerderError(400, "A sink partition needs kafka_topic (a string) and kafka_partition (an integer)")
    if offset is None:
        return topic, number, None
    value = offset.get("kafka_offset") if isinstance(offset, dict) else None
    if not isinstance(value, int) or value < 0:
        raise HerderError(400, "A sink offset needs kafka_offset, a non-negative integer, or null to reset the "
                               "partition")
    return topic, number, value


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _combine(by_name: dict[str, ConfigValue], name: str, values: list[ConfigValue]) -> ConfigValue:
    """One result per key: the first, with the errors of every result for that key."""
    first = by_name[name]
    errors = [e for v in values if v.name == name for e in v.errors]
    return ConfigValue(name, first.value, first.recommended_values, list(dict.fromkeys(errors)), first.visible)


def _validate_sink_topics(config: Mapping[str, str]) -> list[ConfigValue]:
    topics = config.get("topics", "").strip()
    pattern = config.get("topics.regex", "").strip()
    if topics and pattern:
        return [ConfigValue("topics", topics, errors=["topics and topics.regex are mutually exclusive"])]
    if not topics and not pattern:
        return [ConfigValue("topics", None, errors=["Must configure one of topics or topics.regex"])]
    return []

