"""A Moldau broker: storage, metadata, listeners and periodic maintenance, assembled.

Start-up order: log directories and cluster identity (`meta.properties`), the metadata log replayed into an
image, this broker's registration, the partition logs the image assigns to it, then the listeners. Shutdown
runs in reverse and closes every log cleanly, so the next start skips recovery.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import uuid
from typing import Any

from moldau.clock import Clock, SystemClock
from moldau.config import (
    BROKER_CONFIGS,
    NOT_YET_ACTED_ON,
    BrokerConfig,
    ConfigSource,
    describe_broker_configs,
    effective_topic_configs,
    log_config,
)
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.metadata.controller import PRODUCER_ID_BLOCK_SIZE, Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.log import LocalMetadataLog
from moldau.metadata.records import RESOURCE_TOPIC, Endpoint, RegisterBrokerRecord
from moldau.protocol import codec
from moldau.protocol.codec import InvalidRequest
from moldau.protocol.framing import Frame
from moldau.replication.replica_manager import ReplicaManager
from moldau.server.connection import KafkaConnection
from moldau.server.context import RequestContext
from moldau.server.handlers.api_versions import unsupported_version_response
from moldau.server.handlers.registry import APIS
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
# Not named like a partition directory (`<topic>-<n>`), so the log manager never takes it for one.
METADATA_DIR = "__cluster_metadata"
MAINTENANCE_INTERVAL_MS = 1000


class StartupError(Exception):
    """The broker cannot start with this configuration or data directory."""


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.node_id = config.node_id
        self.closing = False
        self.cluster_id = ""
        self._servers: list[asyncio.Server] = []
        self._connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._producer_ids = range(0)
        self._producer_id_next = 0
        self.bound_ports: list[int] = []
        self.controller: Controller
        self.log_manager: LogManager
        self.replicas: ReplicaManager
        self.groups: GroupRuntime

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        for d in self.config.log_dirs:
            os.makedirs(d, exist_ok=True)
        self.cluster_id = self._load_or_create_meta_properties()
        metadata_log = LocalMetadataLog(os.path.join(self.config.log_dirs[0], METADATA_DIR, "metadata.log"))
        self.controller = Controller(metadata_log, self.node_id, self.config.num_partitions,
                                     self.config.default_replication_factor, self._config_default)
        self._warn_about_inert_configs()
        self.log_manager = LogManager(
            self.config.log_dirs, self.clock, self._log_config(self.image, None),
            producer_id_expiration_ms=self.config.get_int("producer.id.expiration.ms"),
            cleaner_dedupe_buffer_bytes=self.config.get_int("log.cleaner.dedupe.buffer.size"))
        self.replicas = ReplicaManager(self.node_id, self.log_manager, self._log_config)
        self.controller.add_listener(self.replicas.apply_image)
        self.replicas.apply_image(None, self.image)
        self.replicas.drop_unknown_logs(self.image)
        self.groups = self._start_group_coordinator()
        await self._start_listeners()
        self.controller.register_broker(self._registration())
        self._tasks.append(asyncio.get_running_loop().create_task(self._maintenance()))
        log.info("moldau broker %d started (cluster %s), listening on %s", self.node_id, self.cluster_id,
                 ", ".join(f"{h}:{p}" for _, h, p in self._bound_listeners()))

    async def stop(self) -> None:
        if self.closing:
            return
        self.closing = True
        for server in self._servers:
            server.close()
        for hosted in self.replicas.partitions.values():
            hosted.wake_waiters()
        for task in self._tasks:
            task.cancel()
        self.groups.close()
        for conn in list(self._connections):
            conn.close()
        await asyncio.sleep(0)
        for server in self._servers:
            await server.wait_closed()
        self.log_manager.close()
        self.controller.close()
        log.info("moldau broker %d stopped cleanly", self.node_id)

    def _start_group_coordinator(self) -> GroupRuntime:
        """Groups of the `__consumer_offsets` partitions led here; loaded now, and followed as the image moves."""
        coordinator = GroupCoordinator(self.node_id, CoordinatorSettings.from_config(self.config), self.controller,
                                       self.replicas)
        runtime = GroupRuntime(coordinator, self.clock)
        self.controller.add_listener(runtime.on_image)
        runtime.start(self.image)
        return runtime

    def _warn_about_inert_configs(self) -> None:
        for name in sorted(NOT_YET_ACTED_ON & BROKER_CONFIGS.keys()):
            if self.config.source(name) != ConfigSource.DEFAULT_CONFIG:
                log.warning("%s is set but has no effect yet: the feature behind it is not built", name)

    def _load_or_create_meta_properties(self) -> str:
        """Every log dir carries the cluster id and node id, so dirs of another cluster or node are refused."""
        found: dict[str, str] = {}
        for d in self.config.log_dirs:
            path = os.path.join(d, "meta.properties")
            if os.path.exists(path):
                props = _read_properties(path)
                if props.get("node.id") != str(self.node_id):
                    raise StartupError(f"{path} belongs to node.id {props.get('node.id')}, not {self.node_id}")
                found[d] = props.get("cluster.id", "")
        ids = set(found.values())
        if len(ids) > 1:
            raise StartupError(f"log dirs belong to different clusters: {sorted(ids)}")
        cluster_id = ids.pop() if ids else self.config.cluster_id or _new_cluster_id()
        for d in self.config.log_dirs:
            if d not in found:
                _write_properties(os.path.join(d, "meta.properties"),
                                  {"version": "1", "cluster.id": cluster_id, "node.id": str(self.node_id)})
        return cluster_id

    async def _start_listeners(self) -> None:
        loop = asyncio.get_running_loop()
        for name, host, port in self.config.listeners:
            server = await loop.create_server(
                lambda: KafkaConnection(self, self.config.socket_request_max_bytes,
                                        self.config.queued_max_requests, self._connections),
                host or None, port, reuse_address=True, backlog=1024,
            )
            self._servers.append(server)
            self.bound_ports.append(server.sockets[0].getsockname()[1])
            log.debug("listener %s bound", name)

    def _bound_listeners(self) -> list[tuple[str, str, int]]:
        return [(name, host or "0.0.0.0", port)
                for (name, host, _), port in zip(self.config.listeners, self.bound_ports, strict=True)]

    def _registration(self) -> RegisterBrokerRecord:
        advertised = self.config.advertised_listeners
        bound = {name: port for name, _, port in self._bound_listeners()}
        endpoints = tuple(
            # Port 0 means "any free port" when binding; advertise the port actually bound.
            Endpoint(name, host or "127.0.0.1", port or bound.get(name, port))
            for name, host, port in advertised
        )
        return RegisterBrokerRecord(self.node_id, uuid.uuid4(), endpoints, self.config.broker_rack)

    async def _maintenance(self) -> None:
        retention_every_ms = self.config.log_retention_check_interval_ms
        last_retention = self.clock.monotonic_ms()
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_MS / 1000)
            try:
                now_ms = self.clock.time_ms()
                self.log_manager.roll_and_flush_due(now_ms)
                self.log_manager.run_cleaner(now_ms)
                if self.clock.monotonic_ms() - last_retention >= retention_every_ms:
                    last_retention = self.clock.monotonic_ms()
                    self.log_manager.run_retention(now_ms)
            except Exception:
                log.exception("log maintenance failed; retrying in %d ms", MAINTENANCE_INTERVAL_MS)

    # -- state used by handlers -----------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.controller.image

    def _log_config(self, image: MetadataImage, topic: str | None) -> LogConfig:
        overrides = dict(image.topic_configs(topic)) if topic else {}
        return log_config(self.effective_config(image), overrides)

    def effective_config(self, image: MetadataImage) -> BrokerConfig:
        """Static config, then cluster-wide dynamic configs, then this broker's own (Kafka's precedence)."""
        cluster_wide = dict(image.broker_configs())
        per_broker = dict(image.broker_configs(self.node_id))
        config = self.config.with_dynamic(cluster_wide) if cluster_wide else self.config
        return config.with_dynamic(per_broker, per_broker=True) if per_broker else config

    def _config_default(self, resource_type: int, name: str) -> str | None:
        config = self.effective_config(self.image)
        if resource_type == RESOURCE_TOPIC:
            entries = effective_topic_configs(config, {})
        else:
            entries = describe_broker_configs(config)
        return next((e.value for e in entries if e.name == name), None)

    def endpoint_for(self, registration: RegisterBrokerRecord) -> Endpoint | None:
        return registration.endpoints[0] if registration.endpoints else None

    def auto_create_topic(self, name: str) -> None:
        config = self.effective_config(self.image)
        self.controller.create_topic(name, config.num_partitions, config.default_replication_factor, {}, {})

    def next_producer_id(self) -> int:
        if self._producer_id_next >= self._producer_ids.stop:
            first = self.controller.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE)
            self._producer_ids = range(first, first + PRODUCER_ID_BLOCK_SIZE)
            self._producer_id_next = first
        self._producer_id_next += 1
        return self._producer_id_next - 1

    # -- request dispatch -----------------------------------------------------------------------------------

    async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[bytes | memoryview] | None:
        header = codec.parse_request_header(frame)
        api = APIS.get(header.api_key)
        if api is None:
            raise InvalidRequest(f"unknown API key {header.api_key}")
        if not api.supports(header.api_version):
            if header.api_key == API_VERSIONS_KEY:
                schema = codec.api_schema(API_VERSIONS_KEY, 0)
                return codec.encode_response(schema, header.correlation_id, unsupported_version_response())
            raise InvalidRequest(f"{api.name} v{header.api_version} is not supported "
                                 f"(supported: v{api.min_version}-v{api.max_version})")
        schema = codec.api_schema(header.api_key, header.api_version)
        if api.decode is not None:
            request = api.decode(frame, codec.body_start(schema, frame, header), header.api_version)
        else:
            request = codec.decode_request(schema, frame, header)
        response = await api.handle(RequestContext(header, schema, self, conn.peer), request)
        if response is None:
            return None
        return codec.encode_response(schema, header.correlation_id, response)


def _new_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _read_properties(path: str) -> dict[str, str]:
    props: dict[str, str] = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
    return props


def _write_properties(path: str, props: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
