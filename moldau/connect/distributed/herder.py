"""The distributed herder: the standalone herder's lifecycle (starting connectors and tasks, statuses, offsets),
driven by the group's assignments and by the config topic instead of by REST calls alone.

- Writes to the config topic that Kafka leaves to the leader (creating, reconfiguring, stopping and deleting
  connectors, storing task configs) happen on the leader; on a follower they raise `RequestTargetError` with
  the leader's URL and the REST API forwards them. Pause and resume write the target state from any worker.
- The worker running a connector asks it for task configs and, when they changed, stores them (through the
  leader); every worker seeing the commit stops its tasks of that connector and rejoins, and the next
  assignment places the new tasks.
- Config records are handled on one thread of the herder (the log's consumer thread only queues them).
- An assignment stops what is revoked, then starts what is added, with the config and offset topics read to
  their end first (so a task moved here resumes from the last offsets its previous worker committed).
- When the group runs the `sessioned` protocol (KIP-507), the leader keeps a session key in the config topic,
  rotated every `inter.worker.key.ttl.ms`; task configs sent to the leader are signed with it, and the leader
  refuses them unsigned or badly signed (see `request_signing`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from moldau.cli.command_config import to_authenticator, to_client_security
from moldau.connect.api import SourceConnector, SourceTask
from moldau.connect.distributed import forwarding
from moldau.connect.distributed.assignor import AssignorState, assign
from moldau.connect.distributed.kafka_stores import (
    ConfigChange,
    KafkaConfigStore,
    KafkaOffsetStore,
    KafkaStatusStore,
    offset_record,
)
from moldau.connect.distributed.member import (
    PROTOCOLS,
    GroupListener,
    GroupMember,
    MemberSettings,
)
from moldau.connect.distributed.protocol import SESSIONED, Allocation, Assignment, MemberMetadata
from moldau.connect.distributed.request_signing import KeyPolicy, Refusal, sign, verify
from moldau.connect.plugins import PluginRegistry
from moldau.connect.worker.exactly_once import (
    ExactlyOnceSourceTaskRunner,
    fence_producers,
    transactional_id,
    transactions_for,
)
from moldau.connect.worker.herder import REBALANCE_MESSAGE, Herder, HerderError, RequestTargetError
from moldau.connect.worker.source_runner import SourceTaskRunner
from moldau.connect.worker.states import State, Status, TargetState, restart_plan
from moldau.connect.worker.task_runner import TaskSetup
from moldau.connect.worker.worker_config import (
    CONNECT_PROTOCOL,
    KEY_ALGORITHM,
    KEY_SIZE,
    KEY_TTL_MS,
    NAME,
    SIGNATURE_ALGORITHM,
    TASKS_MAX,
    VERIFICATION_ALGORITHMS,
    WorkerConfig,
    exactly_once_source,
)

__all__ = ["DistributedHerder"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]
RandomBytes = Callable[[int], bytes]
PUBLISH_ATTEMPTS = 10
RECONCILE_S = 2.0
RECONCILE = ConfigChange("reconcile", "")


class DistributedHerder(Herder, GroupListener):
    def __init__(self, worker: WorkerConfig, registry: PluginRegistry, clock: Clock = time.monotonic,
                 wall_clock: Clock = time.time, random_bytes: RandomBytes = secrets.token_bytes) -> None:
        self.events: queue.Queue[ConfigChange | None] = queue.Queue()
        self.generation = -1
        self.kafka_configs = KafkaConfigStore(worker, self.events.put)
        self.kafka_offsets = KafkaOffsetStore(worker)
        self.kafka_statuses = KafkaStatusStore(worker, lambda: self.generation)
        super().__init__(worker, registry, self.kafka_configs, self.kafka_offsets, self.kafka_statuses)
        self.clock = clock
        self.url = worker.rest_url()
        self.peers = forwarding.WorkerClient(worker.rest_tls().client_context())
        self.peer_urls: dict[str, str] = {self.worker_id: self.url}  # worker id -> URL, from the group's metadata
        self.peer_lock = threading.Lock()  # not the herder's lock: a rebalance must not wait for a REST call
        self.member_id = ""
        self.leader_id = ""
        self.leader_url: str | None = None
        self.allocation = Allocation()
        self.assignor_state = AssignorState()
        self.known: set[str] = set()
        self.started_at: dict[tuple[str, int], int] = {}  # the config offset read when each task here started
        self.member: GroupMember | None = None
        self.closing = False
        self.protocol = ""  # the group protocol of the current generation
        values = worker.values
        self.key_policy = KeyPolicy(values[KEY_ALGORITHM], values[KEY_SIZE], values[KEY_TTL_MS])
        self.signature_algorithm: str = values[SIGNATURE_ALGORITHM]
        self.verification_algorithms: tuple[str, ...] = tuple(values[VERIFICATION_ALGORITHMS])
        self.wall_clock = wall_clock  # session keys carry wall-clock creation times, as Kafka's do
        self.random_bytes = random_bytes
        self.event_thread = threading.Thread(target=self._handle_events, name="connect-herder", daemon=True)

    # --- process lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Read the three topics to their end, then join the group."""
        for log_ in (self.kafka_configs.log, self.kafka_offsets.log, self.kafka_statuses.log):
            log_.start()
        self.event_thread.start()
        values = self.worker.values
        bootstrap = [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in values["bootstrap.servers"]]
        security = self.worker.security_properties()
        settings = MemberSettings(
            bootstrap=bootstrap, group_id=values["group.id"], client_id=f"connect-{self.worker_id}",
            session_timeout_ms=values["session.timeout.ms"], heartbeat_interval_ms=values["heartbeat.interval.ms"],
            rebalance_timeout_ms=values["rebalance.timeout.ms"],
            protocols=PROTOCOLS[str(values[CONNECT_PROTOCOL]).lower()],
            security=to_client_security(security), authenticator=to_authenticator(security))
        self.member = GroupMember(settings, self)
        self.member.start()

    def shutdown(self) -> None:
        """Stop every connector and task here (committing what they can) while still a member, so that nothing
        runs twice, then leave the group (their work moves at once) and close the topics."""
        with self.lock:
            self.closing = True
            self._stop_here(self.allocation)
        if self.member is not None:
            self.member.stop()
        self.events.put(None)
        self.event_thread.join(10)
        self.stop_all()
        for log_ in (self.kafka_configs.log, self.kafka_offsets.log, self.kafka_statuses.log):
            log_.stop()

    def _rejoin(self) -> None:
        if self.member is not None:
            self.member.request_rejoin()

    # --- the group --------------------------------------------------------------------------------------

    def metadata(self) -> MemberMetadata:
        with self.lock:
            return MemberMetadata(self.url, self.kafka_configs.offset, self.allocation)

    def perform_assignment(self, leader: str, protocol: str, members: dict[str, MemberMetadata]
                           ) -> dict[str, Assignment]:
        self.kafka_configs.log.read_to_end()
        with self.peer_lock:
            self.peer_urls.update({_worker_id_of(md.url): md.url for md in members.values()})
        counts = self.kafka_configs.task_counts()
        configured = Allocation.of(counts, ((c, t) for c, n in counts.items() for t in range(n)))
        decisions, self.assignor_state = assign(
            {m: md.allocation for m, md in members.items()}, configured, int(self.clock() * 1000),
            self.worker.values["scheduled.rebalance.max.delay.ms"], self.assignor_state, eager=protocol == "default")
        offset = self.kafka_configs.offset
        return {m: Assignment(leader, members[leader].url, offset, d.assigned, d.revoked, d.delay_ms)
                for m, d in decisions.items()}

    def on_assignment(self, assignment: Assignment, generation: int, member_id: str, protocol: str) -> None:
        with self.lock:
            if self.closing:
                return
            self.generation, self.member_id, self.protocol = generation, member_id, protocol
            self.leader_id, self.leader_url = assignment.leader, assignment.leader_url
            with self.peer_lock:
                self.peer_urls[_worker_id_of(assignment.leader_url)] = assignment.leader_url
            self._stop_here(assignment.revoked)
            self.kafka_configs.log.read_to_end()
            self.kafka_offsets.log.read_to_end()
            for name in sorted(assignment.assigned.connectors):
                self._start_connector_here(name)
            for name, task in sorted(assignment.assigned.tasks):
                self._start_task_here(name, task)
            self._rotate_session_key()

    def revoke_all(self) -> None:
        with self.lock:
            self._stop_here(self.allocation)

    def on_group_lost(self) -> None:
        """Out of the group: whatever ran here may already run elsewhere, so stop it all."""
        with self.lock:
            self.leader_url = None
            self._stop_here(self.allocation)

    def _start_connector_here(self, name: str) -> None:
        if self.configs.connector(name) is None:
            return  # deleted meanwhile: the next round revokes it
        self.allocation = self.allocation | Allocation.of([name])
        self._start_instance(name)

    def _start_task_here(self, name: str, task_id: int) -> None:
        if self.configs.connector(name) is None or task_id >= len(self.configs.task_configs(name)):
            return
        self.allocation = self.allocation | Allocation.of(tasks=[(name, task_id)])
        log.info("connect: starting task %s-%d (config topic read to offset %d)", name, task_id,
                 self.kafka_configs.offset)
        try:
            self._start_task(name, task_id)
        except HerderError as exc:
            self.statuses.put_task(name, task_id, Status(State.FAILED, self.worker_id, exc.message))

    def _stop_here(self, allocation: Allocation) -> None:
        """Stop the given connectors and tasks if they run here."""
        by_connector: dict[str, list[int]] = {}
        for name, task in allocation.tasks & self.allocation.tasks:
            by_connector.setdefault(name, []).append(task)
        for name, tasks in by_connector.items():
            log.info("connect: stopping tasks %s of %s", sorted(tasks), name)
            self._stop_tasks(name, tasks)
        for name in allocation.connectors & self.allocation.connectors:
            self._stop_instance(name)
        self.allocation = self.allocation - allocation
        for name in list(self.running):
            entry = self.running[name]
            if entry.connector is None and not entry.tasks:
                del self.running[name]

    def _stop_instance(self, name: str) -> None:
        entry = self.running.get(name)
        if entry is not None and entry.connector is not None:
            try:
                entry.connector.stop()
            except Exception:
                log.exception("connector %s: stop() failed", name)
            entry.connector = None

    def _publish_task_configs(self, name: str, task_configs: list[dict[str, str]]) -> None:
        """Store new task configs through the leader; identical ones are not written again (that would only
        cause another rebalance)."""
        if task_configs == self.configs.task_configs(name):
            return
        log.info("connect: connector %s has new task configs (%d tasks)", name, len(task_configs))
        for _ in range(PUBLISH_ATTEMPTS):
            if self.leader_url is not None and self.member_id == self.leader_id:
                self._store_task_configs(name, task_configs)
                return
            if self.leader_url is not None:
                status, body = self._send_task_configs(self.leader_url, name, task_configs)
                if status < 300:
                    return
                log.warning("connect: the leader refused task configs of %s: %s %s", name, status, body[:200])
                if status == 403:  # signed with a key the leader has rotated away: read the new one, then retry
                    self.kafka_configs.log.read_to_end()
            time.sleep(1)
        log.error("connect: could not store the task configs of %s; they are asked for again on its restart", name)

    def _send_task_configs(self, leader_url: str, name: str, task_configs: list[dict[str, str]]
                           ) -> tuple[int, bytes]:
        """Kafka's internal `POST /connectors/{c}/tasks` to the leader, signed with the session key when the
        group runs the sessioned protocol."""
        body = json.dumps(task_configs).encode()
        headers: dict[str, str] = {}
        key = self.kafka_configs.session_key
        if self.protocol == SESSIONED and key is not None:
            headers = sign(key, self.signature_algorithm, body)
        url = forwarding.forward_url(leader_url, forwarding.connector_path(name, "/tasks"), "")
        return self.peers.call(url, "POST", body, headers)

    def _rotate_session_key(self) -> None:
        """The leader of a sessioned group writes a session key when there is none, when it has expired, or when
        this worker's config asks for another algorithm or size (Kafka's leader does the same)."""
        if self.protocol != SESSIONED or self.leader_url is None or self.member_id != self.leader_id:
            return
        now_ms = int(self.wall_clock() * 1000)
        if self.key_policy.needs_new_key(self.kafka_configs.session_key, now_ms):
            log.info("connect: writing a new session key to the config topic")
            self.kafka_configs.put_session_key(self.key_policy.generate(self.random_bytes, now_ms))

    def check_signature(self, headers: Mapping[str, str], body: bytes) -> Refusal | None:
        """Whether a request only the leader may receive from other workers is signed as the group's protocol
        requires (only sessioned groups sign, as in Kafka)."""
        if self.protocol != SESSIONED:
            return None
        return verify(headers, body, self.kafka_configs.session_key, self.verification_algorithms)

    def _store_task_configs(self, name: str, task_configs: list[dict[str, str]]) -> None:
        """The leader's write of new task configs. With exactly-once source support (preparing or enabled) it
        first fences every task of the previous configs (KIP-618's zombie fencing): a task of the new
        generation then never reads offsets that a task of the old one could still change."""
        previous = len(self.configs.task_configs(name))
        if previous and exactly_once_source(self.worker) != "disabled" and self._is_source(name):
            group = self.worker.values["group.id"]
            fence_producers(self.worker, [transactional_id(group, name, task) for task in range(previous)])
        self.configs.put_task_configs(name, task_configs)

    def _is_source(self, name: str) -> bool:
        config = self.configs.connector(name)
        try:
            return config is not None and issubclass(self.plugin_for(config).cls, SourceConnector)
        except HerderError:
            return False

    def _source_runner(self, setup: TaskSetup, task: SourceTask, paused: bool) -> SourceTaskRunner:
        if exactly_once_source(self.worker) != "enabled":
            return super()._source_runner(setup, task, paused)
        return ExactlyOnceSourceTaskRunner(setup, task, self.offsets, paused,
                                           transactions_for(setup, self.kafka_offsets.topic, offset_record))

    # --- config records ---------------------------------------------------------------------------------

    def _handle_events(self) -> None:
        while True:
            try:
                change = self.events.get(timeout=RECONCILE_S)
            except queue.Empty:
                change = RECONCILE
            if change is None:
                return
            try:
                with self.lock:
                    if change is RECONCILE:
                        self._reconcile()
                        self._rotate_session_key()
                    else:
                        self._handle(change)
            except Exception:
                log.exception("connect: handling the config change %s failed", change)

    def _reconcile(self) -> None:
        """A safety net for races between assignments and config records: a task here whose config is not
        the committed one is stopped, and the group rebalances to start it again with the right one."""
        stale = Allocation()
        for name in {c for c, _ in self.allocation.tasks}:
            configs = self.configs.task_configs(name)
            entry = self.running.get(name)
            for _, task in [t for t in self.allocation.tasks if t[0] == name]:
                runner = entry.tasks.get(task) if entry else None
                if runner is not None and (task >= len(configs) or runner.setup.task_config != configs[task]):
                    stale = stale | Allocation.of(tasks=[(name, task)])
        if stale:
            log.info("connect: tasks running with an outdated config: %s", sorted(stale.tasks))
            self._stop_here(stale)
            self._rejoin()

    def _handle(self, change: ConfigChange) -> None:
        name = change.name
        mine_tasks = Allocation.of(tasks=[t for t in self.allocation.tasks if t[0] == name])
        if change.kind == "removed":
            self._stop_here(Allocation.of([name]) | mine_tasks)
            self.running.pop(name, None)
            self.known.discard(name)
            self._rejoin()
        elif change.kind == "connector":
            if name not in self.known:
                self.known.add(name)
                self._rejoin()
            elif name in self.allocation.connectors:
                self._stop_instance(name)
                self._start_instance(name)
        elif change.kind == "tasks":
            self._stop_here(self._outdated(name, mine_tasks))
            self._rejoin()
        elif change.kind == "target":
            self._apply_target(name, mine_tasks)

    def _outdated(self, name: str, tasks: Allocation) -> Allocation:
        """The tasks here that run with a config other than the committed one (or no longer exist). A task
        started after the commit was read already runs with it and goes on."""
        configs = self.configs.task_configs(name)
        entry = self.running.get(name)
        # With exactly-once source support the leader fenced every task of the previous configs, changed or not.
        fenced_before = self.kafka_configs.commits.get(name, -1) \
            if exactly_once_source(self.worker) != "disabled" and self._is_source(name) else -1
        outdated = []
        for _, task in tasks.tasks:
            runner = entry.tasks.get(task) if entry else None
            if runner is None or task >= len(configs) or runner.setup.task_config != configs[task] or \
                    self.started_at.get((name, task), -1) < fenced_before:
                outdated.append((name, task))
        return Allocation.of(tasks=outdated)

    def _start_task(self, name: str, task_id: int) -> None:
        self.started_at[(name, task_id)] = self.kafka_configs.offset
        super()._start_task(name, task_id)

    def _apply_target(self, name: str, mine_tasks: Allocation) -> None:
        target = self.configs.target_state(name)
        entry = self.running.get(name)
        if name in self.allocation.connectors:
            if target is TargetState.STOPPED:
                self._stop_instance(name)
                self.statuses.put_connector(name, Status(State.STOPPED, self.worker_id))
            elif entry is None or entry.connector is None:
                self._start_instance(name)
            else:
                self._set_connector_state(name, State.PAUSED if target is TargetState.PAUSED else State.RUNNING)
        for _, task in mine_tasks.tasks:
            runner = entry.tasks.get(task) if entry else None
            if runner is not None and target is TargetState.PAUSED:
                runner.pause()
            elif runner is not None and target is TargetState.STARTED:
                runner.resume()

    # --- REST operations --------------------------------------------------------------------------------

    def _require_leader(self) -> None:
        if self.leader_url is None:
            raise HerderError(409, REBALANCE_MESSAGE)
        if self.member_id != self.leader_id:
            raise RequestTargetError(self.leader_url)

    def put_connector(self, name: str, config: dict[str, str], allow_replace: bool) -> bool:  # type: ignore[override]
        config = {**config, NAME: name}
        self._require_leader()
        with self.lock:
            exists = self.configs.connector(name) is not None
            if exists and not allow_replace:
                raise HerderError(409, f"Connector {name} already exists")
            self._check_valid(config)
            self.configs.put_connector(name, config)
            return not exists

    def accept_task_configs(self, name: str, task_configs: list[dict[str, str]]) -> None:
        """The leader stores task configs sent by the worker running the connector."""
        self._require_leader()
        with self.lock:
            self._require(name)
            if task_configs != self.configs.task_configs(name):
                self._store_task_configs(name, task_configs)

    def delete(self, name: str) -> None:
        self._require_leader()
        with self.lock:
            self._require(name)
            self.configs.remove_connector(name)
            self.statuses.remove(name)

    def pause(self, name: str) -> None:
        self._require(name)
        if self.configs.target_state(name) is not TargetState.STOPPED:
            self.configs.put_target_state(name, TargetState.PAUSED)

    def resume(self, name: str) -> None:
        self._require(name)
        self.configs.put_target_state(name, TargetState.STARTED)

    def stop(self, name: str) -> None:
        self._require_leader()
        with self.lock:
            self._require(name)
            self.configs.put_target_state(name, TargetState.STOPPED)
            self.configs.put_task_configs(name, [])
            self.statuses.remove_tasks(name)

    def reconfigure_tasks(self, name: str) -> None:
        with self.lock:
            entry = self.running.get(name)
            config = self.configs.connector(name)
            if name not in self.allocation.connectors or entry is None or entry.connector is None or config is None:
                return
            fresh = [{**c, "task.class": _qualified(entry.connector.task_class())}
                     for c in entry.connector.task_configs(int(config.get(TASKS_MAX, "1")))]
            self._publish_task_configs(name, fresh)

    def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """KIP-745 across workers: what runs here restarts here, the rest is sent to the worker running it."""
        with self.lock:
            self._require(name)
            connector_status = self.statuses.connector(name) or Status(State.UNASSIGNED, self.worker_id)
            task_statuses = self.statuses.tasks(name)
            plan = restart_plan(connector_status, task_statuses, include_tasks, only_failed)
            answer = self.status(name)
            if plan.connector:
                answer["connector"]["state"] = State.RESTARTING.value
                answer["connector"].pop("trace", None)
            for task in answer["tasks"]:
                if task["id"] in plan.tasks:
                    task["state"] = State.RESTARTING.value
                    task.pop("trace", None)
            remote: list[tuple[Status, str]] = []
            if plan.connector:
                if name in self.allocation.connectors:
                    self._stop_instance(name)
                    self._start_instance(name)
                else:
                    remote.append((connector_status, forwarding.connector_path(name, "/restart")))
            for task_id in plan.tasks:
                if (name, task_id) in self.allocation.tasks:
                    self._restart_task(name, task_id)
                elif task_id in task_statuses:
                    path = forwarding.connector_path(name, f"/tasks/{task_id}/restart")
                    remote.append((task_statuses[task_id], path))
        # Sent without holding the lock: the other worker may be sending us a restart at the same time.
        for status, where in remote:
            self._send_restart(status, where)
        return answer if include_tasks or only_failed else None

    def _send_restart(self, status: Status, path: str) -> None:
        code, body = self.peers.call_json(self._url_of(status.worker_id), "POST", path)
        if code >= 300:
            log.warning("connect: restart %s on %s: %s %s", path, status.worker_id, code, body[:200])

    def restart_task(self, name: str, task_id: int) -> None:
        with self.lock:
            self._require(name)
            statuses = self.statuses.tasks(name)
            if task_id not in statuses or task_id >= len(self.configs.task_configs(name)):
                raise HerderError(404, f"Task {name}-{task_id} not found")
            if (name, task_id) in self.allocation.tasks:
                self._restart_task(name, task_id)
                return
        raise RequestTargetError(self._url_of(statuses[task_id].worker_id))

    def _url_of(self, worker_id: str) -> str:
        """The URL of the worker `worker_id` as the group's metadata gave it (the leader sees every member's, a
        follower the leader's), else with this worker's own scheme: workers of a cluster normally share one."""
        with self.peer_lock:
            known = self.peer_urls.get(worker_id)
        return known or f"{urlsplit(self.url).scheme}://{worker_id}/"

    def internal_routes(self) -> list[tuple[str, Callable[[Request], Awaitable[Response]], list[str]]]:
        """Kafka's internal endpoint through which a connector's worker sends task configs to the leader (signed
        in a sessioned group)."""
        from moldau.connect.rest import error, read_json

        async def put_tasks(request: Request) -> Response:
            body = await read_json(request)
            refusal = self.check_signature(request.headers, request.state.raw_body)
            if refusal is not None:
                return error(refusal.status, refusal.message)
            if not isinstance(body, list) or not all(isinstance(c, dict) for c in body):
                return error(400, "The task configs must be a JSON array of objects")
            configs = [{str(k): str(v) for k, v in c.items()} for c in body]
            await asyncio.to_thread(self.accept_task_configs, request.path_params["name"], configs)
            return Response(status_code=204)
        return [("/connectors/{name}/tasks", put_tasks, ["POST"])]


def _worker_id_of(url: str) -> str:
    return urlsplit(url).netloc


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
