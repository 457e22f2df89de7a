"""A broker's membership in the cluster: register, heartbeat, get unfenced, shut down in a controlled way.

As in KRaft: the broker registers with the active controller (a new incarnation id every start) and gets a
broker epoch; it is fenced (absent from Metadata, leads nothing) until a heartbeat shows it has replayed the
metadata log up to its own registration. It heartbeats every `broker.heartbeat.interval.ms`; the controller
fences it after `broker.session.timeout.ms` of silence, and unfences it on the first heartbeat once it is back
and caught up. A heartbeat answered with STALE_BROKER_EPOCH (the controller forgot or replaced this incarnation)
sends the broker back to registration. On shutdown it asks to be fenced first, so its partitions get new
leaders before it stops serving.

Log directories (KIP-858): the registration lists the broker's online log directories; every heartbeat names
the ones that failed since (at once when one fails, not at the next interval); and after each heartbeat (one is
sent at once when a log is created) the broker tells the controller, with AssignReplicasToDirs, where the
replicas whose directory the metadata does not show yet are, so that the controller can move leadership away
from the replicas of a failed directory. A failed directory the controller could not be told of within
`log.dir.failure.timeout.ms` stops the broker (`dir_failure_reports`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import kio.schema.assign_replicas_to_dirs.v0.request as assign_req
import kio.schema.assign_replicas_to_dirs.v0.response as assign_resp
import kio.schema.broker_heartbeat.v1.request as hb_req
import kio.schema.broker_heartbeat.v1.response as hb_resp
import kio.schema.broker_registration.v4.request as reg_req
import kio.schema.broker_registration.v4.response as reg_resp

from moldau.clock import Clock, SystemClock
from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.quorum import MetadataQuorum
from moldau.metadata.records import Endpoint
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.controller_channel import ControllerChannel, ControllerUnavailable
from moldau.server.dir_failure_reports import DirFailureReports
from moldau.server.handlers import assign_replicas_to_dirs, broker_heartbeat, broker_registration
from moldau.storage.log_manager import LogManager

log = logging.getLogger(__name__)

_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
FENCED_HEARTBEAT_INTERVAL_S = 0.05  # while fenced, heartbeat often: each one may be the one that unfences


class BrokerLifecycle:
    def __init__(self, broker_id: int, cluster_id: str, quorum: MetadataQuorum, controller: Controller,
                 channel: ControllerChannel, endpoints: tuple[Endpoint, ...], rack: str | None,
                 heartbeat_interval_ms: int, log_manager: LogManager | None = None,
                 log_dir_failure_timeout_ms: int = 30_000, clock: Clock | None = None,
                 on_fatal: Callable[[str], None] = lambda reason: None) -> None:
        """`on_fatal(reason)` is called, and heartbeats end, when a failed log directory could not be reported
        within `log_dir_failure_timeout_ms`: the broker must stop."""
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._quorum = quorum
        self._controller = controller
        self._channel = channel
        self._endpoints = endpoints
        self._rack = rack
        self._interval_s = heartbeat_interval_ms / 1000
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self._unfenced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._log_manager = log_manager
        # KIP-966: the epoch under which this broker last closed its logs cleanly, told to the controller at the
        # first registration only (a later one follows a lost registration, not a clean restart).
        self._previous_broker_epoch = log_manager.previous_broker_epoch if log_manager is not None else -1
        self._wake = asyncio.Event()
        self._clock = clock or SystemClock()
        self._dir_reports = DirFailureReports(log_dir_failure_timeout_ms)
        self._on_fatal = on_fatal
        if log_manager is not None:
            log_manager.on_dir_offline = lambda log_dir: self._wake.set()
            log_manager.on_log_created = lambda log_dir: self._wake.set()
            quorum.add_listener(self._on_image)

    async def start(self) -> None:
        """Register and keep heartbeating in the background; returns once the broker is unfenced."""
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._unfenced.wait()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask to be fenced so leadership moves away; True once the controller says we may stop."""
        self.stop()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline and self.broker_epoch >= 0:
            try:
                answer = await self._heartbeat(want_shutdown=True, timeout_s=max(0.1, deadline - loop.time()))
            except ControllerUnavailable:
                return False
            if answer.error_code != ErrorCode.none or answer.should_shut_down:
                return bool(answer.error_code == ErrorCode.none)
            await asyncio.sleep(FENCED_HEARTBEAT_INTERVAL_S)
        return False

    async def _run(self) -> None:
        while True:
            offline = self._offline_dirs()
            self._dir_reports.seen_offline(offline, self._clock.monotonic_ms())
            try:
                if self.broker_epoch < 0:
                    await self._register()
                self._wake.clear()
                answer = await self._heartbeat(want_shutdown=False, timeout_s=max(self._interval_s, 1.0),
                                               offline=offline)
                if answer.error_code == ErrorCode.none:
                    self._dir_reports.told(offline)
                self._on_heartbeat(answer)
                if self.broker_epoch >= 0:
                    await self._assign_replicas_to_dirs()
            except ControllerUnavailable as exc:
                log.warning("broker %d: %s", self.broker_id, exc)
            except Exception:
                log.exception("broker %d: heartbeat failed", self.broker_id)
            if self._unreported_dirs_overdue():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(),
                                       FENCED_HEARTBEAT_INTERVAL_S if self.fenced else self._interval_s)

    async def _register(self) -> None:
        request = make(reg_req.BrokerRegistrationRequest,
            broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=tuple(make(reg_req.Listener, name=e.listener, host=e.host, port=e.port,
                                             security_protocol=_PROTOCOL_IDS.get(e.security_protocol, 0))
                            for e in self._endpoints),
            features=(), rack=self._rack, is_migrating_zk_broker=False,
            log_dirs=tuple(uuid.UUID(d) for d in self._online_dirs()),
            previous_broker_epoch=self._previous_broker_epoch)
        answer = await self._channel.call(request, self._serve_registration, timeout_s=30.0,
                                          retry_if=_not_controller)
        if answer.error_code != ErrorCode.none:
            raise ControllerUnavailable(f"registration refused: {ErrorCode(answer.error_code).name}")
        self.broker_epoch = answer.broker_epoch
        self._previous_broker_epoch = -1
        log.info("broker %d registered with epoch %d", self.broker_id, self.broker_epoch)

    def _unreported_dirs_overdue(self) -> bool:
        overdue = self._dir_reports.overdue(self._clock.monotonic_ms())
        if not overdue:
            return False
        reason = (f"the failure of log directories {', '.join(overdue)} could not be reported to the active "
                  f"controller within log.dir.failure.timeout.ms={self._dir_reports.timeout_ms}")
        log.error("broker %d stops: %s", self.broker_id, reason)
        self._on_fatal(reason)
        return True

    async def _heartbeat(self, want_shutdown: bool, timeout_s: float, offline: list[str] | None = None) -> Any:
        offline = self._offline_dirs() if offline is None else offline
        request = make(hb_req.BrokerHeartbeatRequest,
            broker_id=self.broker_id, broker_epoch=self.broker_epoch,
            current_metadata_offset=self._quorum.applied_offset - 1, want_fence=False,
            want_shut_down=want_shutdown,
            offline_log_dirs=tuple(uuid.UUID(d) for d in offline))
        return await self._channel.call(request, self._serve_heartbeat, timeout_s=timeout_s,
                                        retry_if=_not_controller)

    def _online_dirs(self) -> list[str]:
        return self._log_manager.online_directory_ids() if self._log_manager is not None else []

    def _offline_dirs(self) -> list[str]:
        return self._log_manager.offline_directory_ids() if self._log_manager is not None else []

    def _unrecorded_assignments(self) -> dict[str, dict[uuid.UUID, list[int]]]:
        """directory.id -> topic id -> partitions: this broker's replicas whose directory the metadata does not
        show (new partitions, or a replica moved between directories). Only the logs the log manager names as
        possibly unrecorded are looked at (O(changes) per heartbeat); those the metadata shows, or that it no
        longer gives this broker, are dropped from its list."""
        if self._log_manager is None:
            return {}
        image = self._quorum.image
        pending: dict[str, dict[uuid.UUID, list[int]]] = {}
        settled = []
        for directory, topic_name, index in self._log_manager.unrecorded_assignments():
            topic = image.topics_by_name.get(topic_name)
            partition = topic.partitions.get(index) if topic is not None else None
            if topic is None or partition is None or self.broker_id not in partition.replicas \
                    or partition.directory_of(self.broker_id) == directory:
                settled.append((topic_name, index))
            else:
                pending.setdefault(directory, {}).setdefault(topic.topic_id, []).append(index)
        self._log_manager.assignments_recorded(settled)
        return pending

    def _on_image(self, before: MetadataImage, image: MetadataImage) -> None:
        """A changed topic may assign one of our replicas to another directory than its log's (a partition record
        written without it, say): its log is checked again at the next heartbeat. O(changed topics)."""
        if self._log_manager is None:
            return
        for topic_id, topic in image.topics_by_id.items():
            if before.topics_by_id.get(topic_id) is topic:
                continue
            for partition in topic.partitions.values():
                if self.broker_id in partition.replicas:
                    self._log_manager.check_assignment(topic.name, partition.partition,
                                                       partition.directory_of(self.broker_id))

    async def _assign_replicas_to_dirs(self) -> None:
        pending = self._unrecorded_assignments()
        if not pending:
            return
        request = make(assign_req.AssignReplicasToDirsRequest, broker_id=self.broker_id,
                       broker_epoch=self.broker_epoch, directories=tuple(
                           make(assign_req.DirectoryData, id_=uuid.UUID(directory), topics=tuple(
                               make(assign_req.TopicData, topic_id=topic_id, partitions=tuple(
                                   make(assign_req.PartitionData, partition_index=p) for p in sorted(partitions)))
                               for topic_id, partitions in topics.items()))
                           for directory, topics in pending.items()))
        answer = await self._channel.call(request, self._serve_assignment, timeout_s=max(self._interval_s, 1.0),
                                          retry_if=_not_controller)
        if answer.error_code != ErrorCode.none:
            log.warning("broker %d: AssignReplicasToDirs answered %s", self.broker_id,
                        ErrorCode(answer.error_code).name)

    async def _serve_assignment(self, request: Any) -> Any:
        return await assign_replicas_to_dirs.serve(self._controller, request,
                                                   assign_resp.AssignReplicasToDirsResponse)

    def _on_heartbeat(self, answer: Any) -> None:
        if answer.error_code == ErrorCode.stale_broker_epoch:
            log.warning("broker %d: the controller no longer knows epoch %d; registering again", self.broker_id,
                        self.broker_epoch)
            self.broker_epoch = -1
            return
        if answer.error_code != ErrorCode.none:
            log.warning("broker %d: heartbeat answered %s", self.broker_id, ErrorCode(answer.error_code).name)
            return
        if answer.is_fenced != self.fenced:
            log.info("broker %d is %s", self.broker_id, "fenced" if answer.is_fenced else "unfenced")
        self.fenced = answer.is_fenced
        if not self.fenced:
            self._unfenced.set()

    async def _serve_registration(self, request: Any) -> Any:
        return await broker_registration.serve(self._controller, self.cluster_id, request,
                                               reg_resp.BrokerRegistrationResponse)

    async def _serve_heartbeat(self, request: Any) -> Any:
        return await broker_heartbeat.serve(self._controller, request, hb_resp.BrokerHeartbeatResponse)


def _not_controller(answer: Any) -> bool:
    return bool(answer.error_code == ErrorCode.not_controller)
