"""A Moldau node: metadata quorum, controller, storage, listeners and periodic maintenance, assembled.

A node plays the roles in `process.roles`: `controller` (a voter of the metadata quorum, serving the controller
listener) and `broker` (partitions and clients). A lone node with no `controller.quorum.voters` is a quorum of
one voter and its own broker: the default.

Start-up order: log directories and cluster identity (`meta.properties`); the metadata quorum's durable state
and the controller listeners, so voters can elect a leader; then, for a broker, its partition logs, its
registration with the active controller, and once the controller has unfenced it (it has replayed the metadata
log up to its own registration) the client listeners. Shutdown runs in reverse: a broker first asks to be fenced
(controlled shutdown) so its partitions get new leaders, then closes every log cleanly, so the next start
skips recovery.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from moldau.clock import Clock, SystemClock
from moldau.config import (
    BROKER_CONFIGS,
    NOT_YET_ACTED_ON,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    Voter,
    describe_broker_configs,
    effective_topic_configs,
)
from moldau.config.group_defs import validate_group_configs
from moldau.console.service import ConsoleService, console_for
from moldau.coordinator.group.consumer import TopicVisibility
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.records import OFFSETS_TOPIC
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import SHARE_STATE_TOPIC
from moldau.coordinator.txn.coordinator import TransactionCoordinator, TxnSettings
from moldau.coordinator.txn.records import TRANSACTION_STATE_TOPIC
from moldau.coordinator.txn.runtime import TxnRuntime
from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.log import LocalMetadataLog
from moldau.metadata.quorum import MetadataQuorum
from moldau.metadata.quorum_bootstrap import discover_voters
from moldau.metadata.records import RESOURCE_TOPIC, Endpoint, RegisterBrokerRecord, UserScramCredentialRecord
from moldau.metrics.counters import BrokerCounters
from moldau.net.client import Authenticator, ConnectionPool
from moldau.net.socket_buffers import size_socket_buffers
from moldau.net.timeouts import InterBrokerTimeouts
from moldau.protocol.errors import KafkaError
from moldau.raft import Config as RaftConfig
from moldau.raft import Endpoint as RaftEndpoint
from moldau.registry.service import RegistryService
from moldau.registry.validation import SchemaLookup
from moldau.registry.wiring import registry_for
from moldau.replication.fetcher import FetcherSettings
from moldau.replication.log_dir_mover import LogDirMover
from moldau.replication.replica_manager import ReplicaManager
from moldau.security.acl.authorizer import Authorizer
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.acl.rules import RequestAuthorization
from moldau.security.client_security import PLAINTEXT as PLAINTEXT_CLIENT
from moldau.security.client_security import TLS_PROTOCOLS, ClientSecurity
from moldau.security.connection_quotas import Admission, ConnectionQuotas, ConnectionRates, ip_quota
from moldau.security.delegation_tokens import TokenCredentials, TokenSettings
from moldau.security.mutation_quota import MutationQuotaConfig
from moldau.security.quotas import ClientQuotas, QuotaConfig
from moldau.security.sasl.authenticator import SaslListenerConfig
from moldau.security.sasl.client import SaslClientConfig, controller_sasl, inter_broker_sasl
from moldau.security.sasl.client import authenticate as sasl_authenticate
from moldau.security.sasl.scram import image_lookup
from moldau.security.sasl.settings import SASL_PROTOCOLS, sasl_listener_config
from moldau.security.tls import ListenerTls
from moldau.server import collector, memory
from moldau.server.broker_lifecycle import BrokerLifecycle
from moldau.server.connection import KafkaConnection, WokenConnections
from moldau.server.connection_limits import ConnectionLimits, ReceiveBudget, sweep
from moldau.server.context import RequestContext
from moldau.server.controller_channel import ControllerChannel
from moldau.server.controller_requests import ControllerRequests
from moldau.server.dead_letters import DeadLetters
from moldau.server.dispatch import Dispatcher, RequestFilter
from moldau.server.feature_gate import FeatureGate, config_turned_off_apis
from moldau.server.fetch_sessions import FetchSessionCache
from moldau.server.idle_poll import IdlePoller, idle_poller
from moldau.server.internal_topics import InternalTopics
from moldau.server.listener_tls import ListenerTlsReloader
from moldau.server.replica_links import ReplicaLinks
from moldau.server.share_group_records import write_expired
from moldau.server.share_state_links import ShareStateLinks
from moldau.server.txn_links import TxnLinks
from moldau.share.manager import ShareGroups
from moldau.share.settings import ShareBrokerSettings
from moldau.storage.cleaner import CleanerSettings
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogDirConflict, LogManager
from moldau.telemetry.clients import ClientTelemetry

if TYPE_CHECKING:
    from moldau.security.sasl.jwks import JwksKeySet

log = logging.getLogger(__name__)

# Not named like a partition directory (`<topic>-<n>`), so the log manager never takes it for one.
METADATA_DIR = "__cluster_metadata"
BOOTSTRAP_TIMEOUT_S = 30.0
MAINTENANCE_INTERVAL_MS = 1000
SHARE_MEMBER_SWEEP_MS = 1000
FENCE_CHECK_INTERVAL_S = 0.25
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
MAX_CAUGHT_UP_IDS = 16  # unknown schema ids one produced batch may make the registry catch up for
# The event loop's rest between two slices of a retention pass. A request takes a few turns of the loop (read,
# handle, write); with only one turn between slices (sleep(0)) each of those turns waited behind a slice, and a
# Produce arriving as 36 GB were deleted took 6 ms. 2 ms lets requests in flight finish, and a pass deleting
# 270 segments still takes a fraction of a second.
RETENTION_SLICE_PAUSE_S = 0.002


async def serve_between(slices: Iterable[object], pause_s: float) -> None:
    """Run `slices` (each step of the iterator one slice of work on the event loop), resting `pause_s` after each
    so that clients are served between them."""
    for _ in slices:
        await asyncio.sleep(pause_s)


class StartupError(Exception):
    """The node cannot start with this configuration or data directory."""


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None,
                 bootstrap_scram: Sequence[UserScramCredentialRecord] = ()) -> None:
        """`bootstrap_scram`: SCRAM credentials to write with a new metadata log's first broker registration
        (`moldau server --add-scram`)."""
        self.config = config
        self.bootstrap_scram = tuple(bootstrap_scram)
        self.clock: Clock = clock or SystemClock()
        # Pushed client metrics (KIP-714), in memory only; the subscriptions are configs in the metadata log.
        self.client_telemetry = ClientTelemetry(self.clock, lambda: self.config.telemetry_max_bytes)
        self.node_id = config.node_id
        self.is_broker = "broker" in config.process_roles
        self.is_controller = "controller" in config.process_roles
        self.closing = False
        # Set when the node must stop on its own (a failed log directory it could not report); `failure` says why.
        self.failed = asyncio.Event()
        self.failure: str | None = None
        self.cluster_id = ""
        self.fetch_max_bytes = config.fetch_max_bytes  # read-only: read once rather than per Fetch
        self.config_turned_off_apis = config_turned_off_apis(config)  # group.coordinator.rebalance.protocols
        self._servers: list[asyncio.Server] = []
        self._connections: set[KafkaConnection] = set()
        self._connection_limits = ConnectionLimits.from_config(config)
        self._receive_budget = ReceiveBudget.from_config(config)
        self._woken_connections = WokenConnections()  # lets a lone OffsetCommit be appended without waiting
        self._idle_poller: IdlePoller | None = None  # made on the running loop, before the listeners
        self._tasks: list[asyncio.Task[None]] = []
        self._jwks: dict[str, JwksKeySet] = {}  # OAUTHBEARER signing keys by JWKS URL, shared by listeners
        self._jwks_kept_fresh: set[str] = set()
        self.internal_topics = InternalTopics(lambda: self.image, self._create_topic)
        # Client quotas (KIP-13/55/219) and connection limits (moldau.security).
        self.client_quotas = ClientQuotas(
            QuotaConfig(config.quota_window_num, config.quota_window_size_seconds * 1000),
            MutationQuotaConfig(config.controller_quota_window_num, config.controller_quota_window_size_seconds * 1000))
        self.connection_quotas = ConnectionQuotas.from_config(config)
        self.connection_rates = ConnectionRates()  # from the listeners' configs in start (_set_up_security)
        self.authorizer = Authorizer.from_config(config)  # None unless authorizer.class.name is set
        self.counters = BrokerCounters()  # what /metrics reports of the request path (moldau.metrics)
        # Incremental fetch sessions (KIP-227) of followers and consumers, whatever connection they come on.
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots,
                                                config.min_incremental_fetch_session_eviction_ms)
        filters: list[RequestFilter] = [FeatureGate()]
        if self.authorizer is not None:
            filters.append(RequestAuthorization())
        self.dispatcher = Dispatcher(self, filters=filters,
                                     quotas=self.client_quotas, authorizer=self.authorizer, counters=self.counters)
        self._bound: list[tuple[str, str, int]] = []  # (listener, host, port actually bound)
        self._client_servers: list[asyncio.Server] = []
        # TLS (moldau.security): each SSL listener's server context and certificate-principal mapping, and how
        # this node connects to other brokers and to the controllers; set up before anything listens or connects.
        self._listener_tls: dict[str, ListenerTls] = {}
        self.inter_broker_security: ClientSecurity = PLAINTEXT_CLIENT
        self.client_timeouts = InterBrokerTimeouts.from_config(config)  # what it waits for other nodes
        self.controller_security: ClientSecurity = PLAINTEXT_CLIENT
        self.quorum: MetadataQuorum
        self.controller: Controller
        self.channel: ControllerChannel
        self.lifecycle: BrokerLifecycle | None = None
        self.log_manager: LogManager
        self.replicas: ReplicaManager
        self.log_dir_mover: LogDirMover
        self._unusable_log_dirs: set[str] = set()
        self.groups: GroupRuntime
        self.share: ShareGroups  # share groups (KIP-932): membership, share-partitions led here, share sessions
        self.share_state: ShareCoordinator  # the share coordinator: `__share_group_state` partitions led here
        self.share_state_links: ShareStateLinks
        self.dead_letters: DeadLetters  # writes share groups' dead-letter topics
        self.txn: TxnRuntime
        self.txn_links: TxnLinks
        self.controller_requests: ControllerRequests
        self.registry: RegistryService | None = None  # the schema registry (moldau.registry), on brokers
        self.console: ConsoleService | None = None  # the console's HTTP listener, /metrics (moldau.console)

    @property
    def schema_lookup(self) -> SchemaLookup | None:
        """What Produce asks of the schema registry for topics with schema validation on (parsed schemas by id,
        cached); None where no registry runs."""
        return self.registry.lookup if self.registry is not None else None

    async def catch_up_schemas(self, schema_ids: Iterable[int]) -> None:
        """Let the registry catch up with `_schemas` for ids a produced batch uses and it does not know (yet)."""
        if self.registry is not None:
            lookup = self.registry.lookup
            await asyncio.gather(*(lookup.fresh_schema_by_id(i) for i in sorted(schema_ids)[:MAX_CAUGHT_UP_IDS]))

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        memory.raise_open_file_limit()
        voters = self._check_roles()
        joining = not voters
        self._unusable_log_dirs = self._check_log_dirs()
        self._directory_ids: dict[str, str] = {}
        self.cluster_id = self._load_or_create_meta_properties(
            multi_node=joining or len(voters) > 1 or not self.is_controller)
        self._set_up_security()
        if joining:
            voters = await self._discover_voters()
        try:
            self.console = console_for(self)  # bound now: a port in use stops the node before it joins
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        self.quorum = self._open_quorum(voters)
        # Listeners' key and trust stores altered dynamically are loaded as the metadata log brings them.
        self.listener_tls = ListenerTlsReloader(self.node_id, self.config, self._listener_tls, lambda: self.image,
                                                self.inter_broker_listener)
        # ... and so are this node's own connections to other nodes' listeners, which use the same stores.
        self.listener_tls.add_client(self.inter_broker_listener, self.inter_broker_security)
        controller_names = self.config.controller_listener_names
        if controller_names:
            self.listener_tls.add_client(controller_names[0], self.controller_security)
        self.quorum.add_listener(lambda _old, new: self.listener_tls.follow(new))
        if self.bootstrap_scram and not self.is_controller:
            log.warning("--add-scram has no effect on a broker-only node: give it to the controllers")
        self.controller = Controller(self.quorum, self.node_id, self.config.num_partitions,
                                     self.config.default_replication_factor, self._config_default,
                                     self.config.broker_session_timeout_ms,
                                     group_config_check=self._check_group_configs,
                                     bootstrap_scram=self.bootstrap_scram,
                                     token_settings=self._token_settings())
        self.token_credentials = TokenCredentials(self.config.delegation_token_secret_key, lambda: self.image,
                                                  self.clock.time_ms)
        self.channel = ControllerChannel(self.quorum, f"moldau-node-{self.node_id}", self.controller_security,
                                         self._controller_authenticator(), self.client_timeouts)
        self.controller_requests = ControllerRequests(self.node_id, self.quorum, self.controller, self.channel,
                                                      self._broker_epoch)
        self._warn_about_inert_configs()
        if self.is_broker:
            self._start_storage()
        # Real time even under a test's manual clock: it is about how long this thread would sleep.
        self._idle_poller = idle_poller(self.config.network_idle_poll_us, asyncio.get_running_loop().call_soon,
                                        SystemClock().monotonic_ms)
        await self._start_listeners(controller=True)
        self.quorum.own_endpoints = self._controller_endpoints()
        self._tasks.append(asyncio.get_running_loop().create_task(self._sweep_connections()))
        if self.is_broker:
            # Bound now, so port 0 resolves before registration advertises it; accepting starts once unfenced.
            await self._start_listeners(controller=False)
        self.quorum.add_leadership_listener(self.controller.on_leadership_change)
        self.quorum.start()
        if self.is_controller:
            self._tasks.append(asyncio.get_running_loop().create_task(self._fence_expired_brokers()))
            if self.controller.token_settings.enabled:
                self._tasks.append(asyncio.get_running_loop().create_task(self._remove_expired_tokens()))
            if self.config.auto_leader_rebalance_enable:
                self._tasks.append(asyncio.get_running_loop().create_task(self._rebalance_leaders()))
        if self.is_broker:
            await self._join_cluster()
            for server in self._client_servers:
                await _start_accepting(server)
            if self.registry is not None:
                self.registry.start()
            self._tasks.append(asyncio.get_running_loop().create_task(self._maintenance()))
            self._tasks.append(asyncio.get_running_loop().create_task(self._sweep_share_members()))
        if self.console is not None:
            self.console.start()
        log.info("moldau node %d started (cluster %s, roles %s), listening on %s", self.node_id, self.cluster_id,
                 ",".join(self.config.process_roles),
                 ", ".join(f"{n}://{h}:{p}" for n, h, p in self._bound))

    def _check_roles(self) -> list[Voter]:
        """The quorum's voters; a lone node with no voters configured is a quorum of itself."""
        roles = set(self.config.process_roles)
        if not roles or not roles <= {"broker", "controller"}:
            raise StartupError(f"process.roles must be broker, controller or both, not {sorted(roles)}")
        configured = self.config.controller_quorum_voters
        if not configured and self.config.controller_quorum_bootstrap_servers:
            if self.is_controller and not self._listeners(controller=True):
                raise StartupError("a controller joining a quorum needs a listener named in controller.listener.names")
            return []  # found through the bootstrap servers (KIP-853)
        if not configured:
            if not self.is_controller:
                raise StartupError("a broker-only node needs controller.quorum.voters to find the controllers")
            return [Voter(self.node_id, "", 0)]
        ids = [v.node_id for v in configured]
        if len(set(ids)) != len(ids):
            raise StartupError(f"controller.quorum.voters names a node more than once: {ids}")
        if self.is_controller and self.node_id not in ids:
            raise StartupError(f"node {self.node_id} has the controller role but is not in controller.quorum.voters")
        if not self.is_controller and self.node_id in ids:
            raise StartupError(f"node {self.node_id} is in controller.quorum.voters but lacks the controller role")
        if self.is_controller and not self._listeners(controller=True):
            raise StartupError("a controller in a multi-node quorum needs a listener named in "
                               "controller.listener.names")
        return configured

    async def _discover_voters(self) -> list[Voter]:
        """The quorum's voters, from `controller.quorum.bootstrap.servers`; this node joins as an observer."""
        servers = self.config.controller_quorum_bootstrap_servers
        pool = ConnectionPool(f"moldau-bootstrap-{self.node_id}", self.controller_security,
                              self._controller_authenticator(), self.client_timeouts.setup)
        try:
            voters = await discover_voters(servers, pool, self._controller_listener_name(), BOOTSTRAP_TIMEOUT_S)
        except TimeoutError as exc:
            raise StartupError(str(exc)) from exc
        finally:
            pool.close()
        log.info("controller.quorum.bootstrap.servers: the voters are %s", ", ".join(
            f"{v.node_id}@{v.host}:{v.port}" for v in voters))
        return voters

    def _controller_endpoints(self) -> tuple[RaftEndpoint, ...]:
        """This node's bound controller listeners, as a VotersRecord names them; a wildcard host is replaced by
        the address the configured voters give this node, or the endpoint is left out."""
        names = set(self.config.controller_listener_names)
        configured = {v.node_id: v for v in self.config.controller_quorum_voters}.get(self.node_id)
        endpoints = []
        for name, host, port in self._bound:
            if name not in names:
                continue
            if host in ("", "0.0.0.0", "::"):
                if configured is None:
                    continue
                host = configured.host
            endpoints.append(RaftEndpoint(name, host, port))
        return tuple(endpoints)

    def _controller_listener_name(self) -> str:
        return (self.config.controller_listener_names or ["CONTROLLER"])[0]

    def _open_quorum(self, voters: list[Voter]) -> MetadataQuorum:
        directory = os.path.join(self.config.metadata_log_parent, METADATA_DIR)
        raft_config = RaftConfig.from_config(self.config)
        quorum = MetadataQuorum(self.node_id, voters, self.cluster_id, directory, self.clock, raft_config,
                                self.config.metadata_log_max_record_bytes_between_snapshots,
                                security=self.controller_security, authenticator=self._controller_authenticator(),
                                listener_name=self._controller_listener_name(),
                                snapshot_every_ms=self.config.metadata_log_max_snapshot_interval_ms,
                                request_timeout_ms=self.config.controller_quorum_request_timeout_ms,
                                connection_setup=self.client_timeouts.setup)
        quorum.open(initial_records=self._legacy_metadata(directory))
        return quorum

    @staticmethod
    def _legacy_metadata(directory: str) -> list[Any]:
        """Records of a single-node metadata log written before the quorum existed; they seed the quorum once."""
        path = os.path.join(directory, "metadata.log")
        if not os.path.exists(path):
            return []
        legacy = LocalMetadataLog(path)
        legacy.close()
        records = [r for _, r in legacy.entries]
        os.replace(path, path + ".migrated")
        log.info("migrating %d records of the single-node metadata log into the metadata quorum", len(records))
        return records

    def _start_storage(self) -> None:
        try:
            self.log_manager = LogManager(
                self.config.log_dirs, self.clock, self._log_config(self.image, None),
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                cleaner_settings=lambda: CleanerSettings.from_config(self.effective_config(self.image)),
                offline_dirs=self._unusable_log_dirs, directory_ids=self._directory_ids)
        except (LogDirConflict, OSError) as exc:
            raise StartupError(str(exc)) from exc
        self.replicas = ReplicaManager(self.node_id, self.log_manager, self._log_config, self.clock,
                                       lag_max_ms=self.config.replica_lag_time_max_ms,
                                       fetcher_settings=FetcherSettings.from_config(self.config))
        self.replicas.transaction_verification = self.config.transaction_partition_verification_enable
        self.replicas.replica_selector = self.config.replica_selector_class or None
        self.replica_links = ReplicaLinks(self, self.replicas, self.inter_broker_authenticator())
        self._configure_replication(None, self.image)
        self.quorum.add_listener(self._configure_replication)
        self.replicas.start()
        self.quorum.add_listener(self._host_partitions)
        self._host_partitions(None, self.image)
        self.log_dir_mover = LogDirMover(
            self.replicas,
            lambda: self.effective_config(self.image).replica_alter_log_dirs_io_max_bytes_per_second)
        self.log_dir_mover.start()
        self.groups = self._start_group_coordinator()
        self.share = self._start_share_groups()
        self.txn_links = TxnLinks(self, self.inter_broker_authenticator())
        self.txn = self._start_transaction_coordinator()
        try:
            self.registry = registry_for(self)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc

    def _configure_replication(self, before: MetadataImage | None, image: MetadataImage) -> None:
        """The replication quotas' rates and windows, and the replica fetchers per leader, from the broker configs,
        when they changed (dynamically)."""
        if before is not None and before.broker_configs() == image.broker_configs() and \
                before.broker_configs(self.node_id) == image.broker_configs(self.node_id):
            return
        config = self.effective_config(image)
        self.replicas.quotas.configure(
            config.leader_replication_throttled_rate, config.follower_replication_throttled_rate,
            QuotaConfig(config.replication_quota_window_num, config.replication_quota_window_size_seconds * 1000))
        self.replicas.set_num_fetchers(config.num_replica_fetchers)

    def _host_partitions(self, before: MetadataImage | None, image: MetadataImage) -> None:
        # An image may bring thousands of partitions, each a dozen objects that stay: see `collector.paused`.
        with collector.paused():
            self.replicas.apply_image(before, image)

    async def _join_cluster(self) -> None:
        """Register with the active controller and wait to be unfenced; only then may clients be served."""
        self.lifecycle = BrokerLifecycle(self.node_id, self.cluster_id, self.quorum, self.controller, self.channel,
                                         self._endpoints(), self.config.broker_rack,
                                         self.config.broker_heartbeat_interval_ms, self.log_manager,
                                         self.config.log_dir_failure_timeout_ms, self.clock, self.fail)
        loop = asyncio.get_running_loop()
        waiting = loop.create_task(self.lifecycle.start())
        # As Kafka: a broker that cannot register within initial.broker.registration.timeout.ms stops with an error
        # (an unreachable or misconfigured quorum), rather than wait unnoticed; once registered it waits to be
        # unfenced for as long as that takes.
        timeout_ms = self.config.initial_broker_registration_timeout_ms
        deadline = loop.time() + timeout_ms / 1000
        while not waiting.done():
            registered = self.lifecycle.broker_epoch >= 0
            if not registered and loop.time() >= deadline:
                waiting.cancel()
                self.lifecycle.stop()
                raise StartupError(f"broker {self.node_id} did not register with the controller quorum within "
                                   f"initial.broker.registration.timeout.ms={timeout_ms} (quorum leader: "
                                   f"{self.quorum.leader_id}); check controller.quorum.bootstrap.servers or "
                                   "controller.quorum.voters and that the controllers are up")
            wait_s = 10.0 if registered else min(10.0, max(0.05, deadline - loop.time()))
            done, _ = await asyncio.wait({waiting}, timeout=wait_s)
            if not done and wait_s >= 10.0:  # every ten seconds, not at the deadline's short last wait
                log.info("broker %d is waiting to join the cluster (quorum leader: %s)", self.node_id,
                         self.quorum.leader_id)
        waiting.result()
        # The heartbeat that says "unfenced" can arrive before this node applied the record that unfenced it. Until
        # it has, its Metadata answers would leave itself out of the brokers while naming itself the controller,
        # and a client sending an admin request to that controller (librdkafka does) would wait for a broker that
        # never appears.
        while not await self.quorum.wait_for_image(lambda image: image.is_live(self.node_id), 10.0):
            log.info("broker %d is unfenced but has not applied its unfencing yet (metadata offset %d)", self.node_id,
                     self.quorum.image.offset)
        # Only now is the image known to be complete: logs it does not mention belong to deleted topics.
        self.replicas.drop_unknown_logs(self.image)

    def fail(self, reason: str) -> None:
        """Ask the process running this node to stop it, with an error: it can no longer serve safely."""
        if self.failure is None:
            self.failure = reason
            self.failed.set()

    async def stop(self) -> None:
        if self.closing:
            return
        self.closing = True
        if self.lifecycle is not None:
            await self._controlled_shutdown(self.lifecycle)
        # Each HTTP listener waits a moment for its connections to finish: side by side, the waits overlap.
        await asyncio.gather(*(service.stop() for service in (self.console, self.registry) if service is not None))
        for server in self._servers:
            server.close()
        if self.is_broker:
            self.log_dir_mover.close()
            self.replicas.close()
        for task in self._tasks:
            task.cancel()
        if self.is_broker:
            self.groups.close()
            self.txn.close()
            self.share_state.close()
            self.share_state_links.close()
            self.dead_letters.close()
            self.txn_links.close()
        for conn in list(self._connections):
            conn.close()
        await asyncio.sleep(0)
        for server in self._servers:
            await server.wait_closed()
        await self.quorum.stop()
        self.channel.close()
        if self.is_broker:
            self.log_manager.close(self.lifecycle.broker_epoch if self.lifecycle is not None else -1)
        log.info("moldau node %d stopped cleanly", self.node_id)

    async def _controlled_shutdown(self, lifecycle: BrokerLifecycle) -> None:
        """Move leaderships away first when other brokers can take them; a lone broker just stops."""
        others = [b for b in self.image.live_brokers() if b != self.node_id]
        if not others or not self.config.controlled_shutdown_enable or self.quorum.leader_id is None:
            lifecycle.stop()  # nobody to hand leadership to, or no controller to ask
            return
        if await lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S):
            log.info("broker %d: controlled shutdown done, leaderships moved", self.node_id)
        else:
            log.warning("broker %d: controlled shutdown did not finish; stopping anyway", self.node_id)

    async def _fence_expired_brokers(self) -> None:
        while True:
            await asyncio.sleep(FENCE_CHECK_INTERVAL_S)
            if not self.quorum.is_active_controller():
                continue
            try:
                await self.controller.fence_expired_brokers()
            except KafkaError as exc:
                log.debug("fencing check skipped: %s", exc.message)
            except Exception:
                log.exception("fencing check failed")

    def _token_settings(self) -> TokenSettings:
        return TokenSettings(self.config.delegation_token_secret_key or None,
                             self.config.delegation_token_max_lifetime_ms,
                             self.config.delegation_token_expiry_time_ms)

    async def _remove_expired_tokens(self) -> None:
        """Every delegation.token.expiry.check.interval.ms, the active controller deletes expired tokens (KIP-48)."""
        interval_s = self.config.delegation_token_expiry_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            if not self.quorum.is_active_controller():
                continue
            try:
                removed = await self.controller.remove_expired_delegation_tokens(self.clock.time_ms())
            except KafkaError as exc:
                log.debug("expired token check skipped: %s", exc.message)
                continue
            except Exception:
                log.exception("expired token check failed")
                continue
            if removed:
                log.info("deleted %d expired delegation token(s)", removed)

    async def _rebalance_leaders(self) -> None:
        """Every leader.imbalance.check.interval.seconds, the active controller moves leaderships back to preferred
        replicas on brokers that lead too few of their own (after failovers, or a broker's return)."""
        interval_s = self.config.leader_imbalance_check_interval_seconds
        while True:
            await asyncio.sleep(interval_s)
            if not self.quorum.is_active_controller():
                continue
            try:
                await self.controller.rebalance_leaders(self.config.leader_imbalance_per_broker_percentage)
            except KafkaError as exc:
                log.debug("leader rebalance skipped: %s", exc.message)
            except Exception:
                log.exception("leader rebalance failed")

    def _start_group_coordinator(self) -> GroupRuntime:
        """Groups of the `__consumer_offsets` partitions led here; loaded now, and followed as the image moves."""
        settings = CoordinatorSettings.from_config(self.config, self._topic_visibility())
        coordinator = GroupCoordinator(self.node_id, settings, lambda: self.image, self._request_offsets_topic,
                                       self.replicas)
        runtime = GroupRuntime(coordinator, self.clock, self._woken_connections.others_waiting)
        self.quorum.add_listener(runtime.on_image)
        runtime.start(self.image)
        return runtime

    def _topic_visibility(self) -> TopicVisibility | None:
        """Who may DESCRIBE which topic, by the ACLs of the current image: what a consumer's regex may resolve
        to. None without an authorizer."""
        authorizer = self.authorizer
        if authorizer is None:
            return None

        def visible(principal: str, host: str, topic: str) -> bool:
            return authorizer.authorize(self.image.acls, principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        topic)
        return visible

    def _start_share_groups(self) -> ShareGroups:
        """Share groups, with share-partition state kept by the share coordinator; a share-partition is dropped
        when its partition is no longer led here (its next leader reads the state back)."""
        self.share_state = ShareCoordinator(self.node_id, ShareStateSettings.from_config(self.config),
                                            lambda: self.image, self._request_share_state_topic, self.replicas,
                                            self.clock, self._woken_connections.others_waiting)
        self.quorum.add_listener(self.share_state.on_image)
        self.share_state.on_image(None, self.image)
        self.share_state_links = ShareStateLinks(self, self.inter_broker_authenticator())
        self.dead_letters = DeadLetters(self)
        share = ShareGroups(ShareBrokerSettings.from_config(self.config), self.clock, self.replicas,
                            self.share_state_links, group_configs=lambda group_id: self.image.group_configs(group_id),
                            dead_letters=self.dead_letters, durable=self.groups.coordinator)

        def follow(_old: MetadataImage | None, _new: MetadataImage) -> None:
            share.forget_partitions(self._leads)

        self.quorum.add_listener(follow)
        return share

    def _connection_lost(self, conn: KafkaConnection) -> None:
        """A client's connection is gone: the share sessions it carried end, as in Kafka (KAFKA-19015)."""
        if hasattr(self, "share"):  # a controller-only node has no share groups
            self.share.connection_closed(conn.peer)

    def _leads(self, topic: str, partition: int) -> bool:
        hosted = self.replicas.partitions.get((topic, partition))
        return hosted is not None and hosted.leader_state is not None

    def _start_transaction_coordinator(self) -> TxnRuntime:
        """Transactions of the `__transaction_state` partitions led here; loaded now, and followed as the image
        moves."""
        coordinator = TransactionCoordinator(self.node_id, TxnSettings.from_config(self.config), lambda: self.image,
                                             self._request_transaction_topic, self.replicas)
        runtime = TxnRuntime(coordinator, self.clock, self.next_producer_id, self.txn_links)
        self.quorum.add_listener(runtime.on_image)
        runtime.start(self.image)
        return runtime

    def _warn_about_inert_configs(self) -> None:
        for name in sorted(NOT_YET_ACTED_ON & BROKER_CONFIGS.keys()):
            if self.config.source(name) != ConfigSource.DEFAULT_CONFIG:
                log.warning("%s is set but has no effect", name)

    def _check_log_dirs(self) -> set[str]:
        """Create missing log dirs; return those that cannot be used. They start offline (KIP-112), unless
        it is the one that holds the metadata log (metadata.log.dir, else the first), or every one of them."""
        metadata_parent = self.config.metadata_log_parent
        unusable: set[str] = set()
        for d in dict.fromkeys([*self.config.log_dirs, metadata_parent]):
            try:
                os.makedirs(d, exist_ok=True)
                os.listdir(d)
                props = os.path.join(d, "meta.properties")
                if os.path.exists(props):
                    _read_properties(props)
            except OSError as exc:
                if d == metadata_parent:
                    raise StartupError(f"the directory {d} holds the metadata log and cannot be used: "
                                       f"{exc}") from exc
                log.error("log directory %s cannot be used (%s): it starts offline", d, exc)
                unusable.add(d)
        self._refuse_a_metadata_log_elsewhere(metadata_parent, unusable)
        return unusable

    def _refuse_a_metadata_log_elsewhere(self, metadata_parent: str, unusable: set[str]) -> None:
        """A metadata log left in another directory (metadata.log.dir set, changed or unset after it was written)
        would otherwise be ignored for a new, empty one, and the topics it describes deleted as unknown."""
        for d in self.config.log_dirs:
            other = os.path.join(d, METADATA_DIR)
            if d != metadata_parent and d not in unusable and os.path.isdir(other):
                raise StartupError(
                    f"{other} holds this node's metadata log, but the metadata log is configured in "
                    f"{metadata_parent} (metadata.log.dir): move {METADATA_DIR} there, or set metadata.log.dir "
                    f"to {d}")

    def _load_or_create_meta_properties(self, multi_node: bool) -> str:
        """Every log dir carries the cluster id and node id, so dirs of another cluster or node are refused, and
        its own `directory.id` (KIP-858), given to a dir that lacks one."""
        found: dict[str, dict[str, str]] = {}
        usable = [d for d in self.config.log_dirs if d not in self._unusable_log_dirs]
        # A metadata.log.dir of its own carries the ids as well (Kafka formats it with the log dirs), but no
        # directory.id of a log dir: it holds no partitions.
        metadata_only = [self.config.metadata_log_parent] if self.config.metadata_log_parent not in usable else []
        for d in usable + metadata_only:
            path = os.path.join(d, "meta.properties")
            if os.path.exists(path):
                props = _read_properties(path)
                if props.get("node.id") != str(self.node_id):
                    raise StartupError(f"{path} belongs to node.id {props.get('node.id')}, not {self.node_id}")
                found[d] = props
        ids = {props.get("cluster.id", "") for props in found.values()}
        if len(ids) > 1:
            raise StartupError(f"log dirs belong to different clusters: {sorted(ids)}")
        configured = self.config.cluster_id
        if ids and configured and configured not in ids:
            raise StartupError(f"the log dirs belong to cluster {ids.pop()}, but cluster.id is {configured}")
        if not ids and not configured and multi_node:
            # Every node of a cluster must be formatted with the same id; a generated one would differ per node.
            raise StartupError("a node of a multi-node cluster needs cluster.id (the same on every node) on "
                               "its first start")
        cluster_id = ids.pop() if ids else configured or _new_cluster_id()
        directory_ids = [props["directory.id"] for d, props in found.items() if props.get("directory.id")
                         and d not in metadata_only]
        if len(set(directory_ids)) != len(directory_ids):
            raise StartupError(f"two log dirs have the same directory.id: {sorted(directory_ids)}")
        for d in metadata_only:
            if d not in found:
                _write_properties(os.path.join(d, "meta.properties"),
                                  {"version": "1", "cluster.id": cluster_id, "node.id": str(self.node_id)})
        for d in usable:
            props = found.get(d, {"version": "1", "cluster.id": cluster_id, "node.id": str(self.node_id)})
            if not props.get("directory.id"):
                props["directory.id"] = _new_directory_id()
                _write_properties(os.path.join(d, "meta.properties"), props)
            directory_uuid = _directory_uuid(props["directory.id"])
            if directory_uuid is not None:
                self._directory_ids[d] = directory_uuid
        return cluster_id

    def _set_up_security(self) -> None:
        """Build every SSL listener's context and the outgoing connections' security: a bad key store, trust
        store or TLS setting stops the node here, with the config named."""
        try:
            for name, _, _ in self.config.listeners:
                if self.config.security_protocol(name) in TLS_PROTOCOLS:
                    self._listener_tls[name] = ListenerTls.from_config(self.config, name)
            self.inter_broker_security = ClientSecurity.for_listener(self.config, self.inter_broker_listener)
            controller_names = self.config.controller_listener_names
            self.controller_security = ClientSecurity.for_listener(
                self.config, controller_names[0] if controller_names else "")
            self.connection_rates = ConnectionRates.from_config(
                self.config, [name for name, _, _ in self._listeners(False)], self.inter_broker_listener)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc

    def _admit_connection(self, listener: str, host: str) -> Admission:
        """When a new connection on a client listener may be served (KIP-612's connection creation rates)."""
        return self.connection_rates.admit(listener, host, ip_quota(self.image.client_quotas, host),
                                           self.clock.monotonic_ms())

    def _listeners(self, controller: bool) -> list[tuple[str, str, int]]:
        names = set(self.config.controller_listener_names)
        return [(n, h, p) for n, h, p in self.config.listeners if (n in names) == controller]

    async def _start_listeners(self, controller: bool) -> None:
        if controller and not self.is_controller:
            return
        loop = asyncio.get_running_loop()
        for name, host, port in self._listeners(controller):
            tls = self._listener_tls.get(name)
            sasl = self._sasl_config(name, controller)
            await self._load_jwks()
            server = await loop.create_server(
                lambda name=name, tls=tls, sasl=sasl: KafkaConnection(
                    self.dispatcher, self._connection_limits, self._receive_budget, self._connections, name,
                    controller, self.clock, self.config.security_protocol(name),
                    # On SASL_SSL the principal comes from SASL, as in Kafka; on SSL from the client certificate.
                    tls.principal_mapper if tls is not None and self.config.security_protocol(name) == "SSL"
                    else None,
                    connection_quotas=None if controller else self.connection_quotas, sasl=sasl,
                    rate_admission=None if controller else self._admit_connection,
                    on_lost=self._connection_lost,
                    sends_files=tls is None and self.config.fetch_zero_copy_enable, woken=self._woken_connections,
                    idle_poller=self._idle_poller),
                host or None, port, reuse_address=True, backlog=self.config.socket_listen_backlog_size,
                start_serving=controller,
                ssl=tls.context if tls is not None else None,
            )
            for sock in server.sockets:
                size_socket_buffers(sock, self.config.socket_send_buffer_bytes,
                                    self.config.socket_receive_buffer_bytes)
            self._servers.append(server)
            self._bound.append((name, host or "0.0.0.0", server.sockets[0].getsockname()[1]))
            if not controller:
                self._client_servers.append(server)
            log.debug("listener %s bound", name)

    def inter_broker_authenticator(self) -> Authenticator | None:
        """SASL for connections to other brokers' inter-broker listener, when that listener is a SASL one."""
        return self._authenticator(inter_broker_sasl)

    def _controller_authenticator(self) -> Authenticator | None:
        """SASL for connections to the controllers (quorum, registration, forwarding), on a SASL controller
        listener."""
        return self._authenticator(controller_sasl)

    def _authenticator(self, settings: Callable[[BrokerConfig], SaslClientConfig | None]) -> Authenticator | None:
        try:
            sasl = settings(self.config)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        return None if sasl is None else functools.partial(sasl_authenticate, sasl)

    def _sasl_config(self, listener: str, controller: bool) -> SaslListenerConfig | None:
        """What a SASL_PLAINTEXT / SASL_SSL listener accepts (None for others); SCRAM users come from the image."""
        if self.config.security_protocol(listener) not in SASL_PROTOCOLS:
            return None
        try:
            sasl = sasl_listener_config(self.config, listener, image_lookup(lambda: self.image), controller,
                                        self.clock, self._jwks)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        if controller:
            return sasl  # nodes authenticate with PLAIN there; tokens are for clients
        return dataclasses.replace(sasl, delegation_tokens=self.token_credentials.lookup)

    async def _load_jwks(self) -> None:
        """Fetch each new JWKS once before its listener opens (a provider that does not answer is retried in the
        background; its tokens are refused until it does), then keep it fresh."""
        if not self._jwks:
            return
        # PyJWT loads only where OAUTHBEARER is configured (a twentieth of a second of every other start).
        from moldau.security.sasl.jwks import keep_fresh, refresh_once

        for url, keys in self._jwks.items():
            if url not in self._jwks_kept_fresh:
                self._jwks_kept_fresh.add(url)
                await refresh_once(keys)
                self._tasks.append(asyncio.get_running_loop().create_task(keep_fresh(keys)))

    async def _sweep_connections(self) -> None:
        """Close idle connections and stalled frames (see moldau.server.connection_limits)."""
        limits = self._connection_limits
        interval_s = max(0.05, min([1.0, *(ms / 4000 for ms in (limits.idle_ms, limits.frame_timeout_ms) if ms > 0)]))
        trimmer = memory.Trimmer()
        while True:
            await asyncio.sleep(interval_s)
            sweep(self._connections, limits, self.clock.monotonic_ms())
            budget = self._receive_budget
            trimmer.observe(len(self._connections), budget.take_peak(), budget.used)

    def idle_poll_seconds(self) -> float | None:
        """How long the event loop has polled instead of sleeping (`network.idle.poll.us`); None when it never
        does (metrics)."""
        return None if self._idle_poller is None else self._idle_poller.polled_ms() / 1000

    def connection_counts(self) -> dict[str, int]:
        """Open connections per listener, every bound listener named (metrics)."""
        counts = dict.fromkeys((name for name, _, _ in self._bound), 0)
        for conn in self._connections:
            counts[conn.listener] = counts.get(conn.listener, 0) + 1
        return counts

    @property
    def bound_ports(self) -> list[int]:
        """The client listeners' ports as bound (port 0 resolved)."""
        controller_names = set(self.config.controller_listener_names)
        return [port for name, _, port in self._bound if name not in controller_names]

    def _endpoints(self) -> tuple[Endpoint, ...]:
        """The advertised client endpoints; port 0 ("any free port") is advertised as the port actually bound."""
        controller_names = set(self.config.controller_listener_names)
        bound = {name: port for name, _, port in self._bound}
        endpoints = tuple(Endpoint(name, host or "127.0.0.1", port or bound.get(name, port),
                                   self.config.security_protocol(name))
                          for name, host, port in self.config.advertised_listeners if name not in controller_names)
        # The schema registry's URL rides along under a name no Kafka listener can have (moldau.registry.service).
        registry = self.registry.endpoint(endpoints[0].host if endpoints else "127.0.0.1") if self.registry else None
        return endpoints if registry is None else (*endpoints, registry)

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
                    await serve_between(self.log_manager.retention_slices(now_ms), RETENTION_SLICE_PAUSE_S)
            except Exception:
                log.exception("log maintenance failed; retrying in %d ms", MAINTENANCE_INTERVAL_MS)

    async def _sweep_share_members(self) -> None:
        """Remove share group members silent for their session timeout even when no share request comes, so
        what they held is released and their leaving is written, as Kafka's session timers do."""
        while True:
            await asyncio.sleep(SHARE_MEMBER_SWEEP_MS / 1000)
            try:
                self.share.expire_members(self.share.now_ms())
                await write_expired(self)
            except Exception:
                log.exception("share group member sweep failed; retrying in %d ms", SHARE_MEMBER_SWEEP_MS)

    # -- state used by handlers -----------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return self.quorum.image

    def _log_config(self, image: MetadataImage, topic: str | None) -> LogConfig:
        overrides = dict(image.topic_configs(topic)) if topic else {}
        return LogConfig.from_config(self.effective_config(image), overrides)

    def effective_config(self, image: MetadataImage) -> BrokerConfig:
        """Static config, then cluster-wide dynamic configs, then this broker's own (Kafka's precedence)."""
        cluster_wide = dict(image.broker_configs())
        per_broker = dict(image.broker_configs(self.node_id))
        config = self.config.with_dynamic(cluster_wide) if cluster_wide else self.config
        return config.with_dynamic(per_broker, per_broker=True) if per_broker else config

    def _check_group_configs(self, configs: Mapping[str, str]) -> None:
        validate_group_configs(configs, self.effective_config(self.image))

    def _config_default(self, resource_type: int, name: str) -> str | None:
        config = self.effective_config(self.image)
        if resource_type == RESOURCE_TOPIC:
            entries = effective_topic_configs(config, {})
        else:
            entries = describe_broker_configs(config)
        return next((e.value for e in entries if e.name == name), None)

    def endpoint_for(self, registration: RegisterBrokerRecord, listener: str = "") -> Endpoint | None:
        """The broker's endpoint on the named listener (Kafka answers each client with the addresses of the listener
        it connected to), or its first endpoint when it has none of that name or no name is given."""
        for endpoint in registration.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return registration.endpoints[0] if registration.endpoints else None

    def inter_broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where this node reaches another broker: its endpoint on the inter-broker listener, if registered."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return None
        endpoint = self.endpoint_for(registration, self.inter_broker_listener)
        return (endpoint.host, endpoint.port) if endpoint is not None else None

    @property
    def inter_broker_listener(self) -> str:
        """The listener followers use to reach leaders: `inter.broker.listener.name`, else the first client one."""
        configured = self.config.inter_broker_listener_name
        if configured:
            return configured
        controller_names = set(self.config.controller_listener_names)
        return next((lsn.name for lsn in self.config.listeners if lsn.name not in controller_names), "")

    # -- reaching the controller ----------------------------------------------------------------------------

    async def forward_to_controller(self, ctx: RequestContext, request: Any) -> Any:
        """The active controller's answer to a client's admin request, or None to answer it here."""
        return await self.controller_requests.forward_to_controller(ctx, request)

    async def forward_enveloped(self, ctx: RequestContext, request: Any) -> Any:
        """As `forward_to_controller`, with the client's principal (Envelope): for delegation tokens."""
        return await self.controller_requests.forward_enveloped(ctx, request)

    async def _create_topic(self, name: str, partitions: int, replication_factor: int,
                            configs: dict[str, str]) -> None:
        await self.controller_requests.create_topic(name, partitions, replication_factor, configs)

    def _broker_epoch(self) -> int:
        return self.lifecycle.broker_epoch if self.lifecycle is not None else -1

    async def auto_create_topic(self, name: str) -> None:
        config = self.effective_config(self.image)
        await self.controller_requests.create_topic(name, config.num_partitions, config.default_replication_factor,
                                                    {})

    async def next_producer_id(self) -> int:
        """A fresh producer id from a block reserved through the controller. Raises KafkaError."""
        return await self.controller_requests.next_producer_id()

    def _request_offsets_topic(self) -> None:
        settings = self.groups.coordinator.settings
        self.internal_topics.request(OFFSETS_TOPIC, settings.offsets_topic_partitions,
                                     settings.offsets_topic_replication_factor,
                                     lambda _: settings.offsets_topic_configs())

    def _request_share_state_topic(self) -> None:
        settings = self.share_state.settings
        self.internal_topics.request(SHARE_STATE_TOPIC, settings.num_partitions, settings.replication_factor,
                                     settings.topic_configs)

    def _request_transaction_topic(self) -> None:
        settings = self.txn.coordinator.settings
        self.internal_topics.request(TRANSACTION_STATE_TOPIC, settings.num_partitions, settings.replication_factor,
                                     settings.topic_configs)

    async def ensure_offsets_topic(self, timeout_s: float = 10.0) -> None:
        """Wait (bounded) for `__consumer_offsets` to exist, creating it if need be; errors are left to callers."""
        await self.internal_topics.ensure(OFFSETS_TOPIC, self._request_offsets_topic, timeout_s)

    async def ensure_transaction_topic(self, timeout_s: float = 10.0) -> None:
        """Wait (bounded) for `__transaction_state` to exist, creating it if need be; errors are left to callers."""
        await self.internal_topics.ensure(TRANSACTION_STATE_TOPIC, self._request_transaction_topic, timeout_s)


def _new_cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _directory_uuid(text: str) -> str | None:
    """A directory.id (Kafka's base64 Uuid text) as the canonical Uuid text the metadata records; None if it is
    not a Uuid (the directory then serves, but is not reported to the controller)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return str(uuid.UUID(bytes=raw))
    except ValueError:
        return None


def _new_directory_id() -> str:
    # A random Uuid in Kafka's text form; Kafka never hands out one whose text starts with "-".
    while (text := _new_cluster_id()).startswith("-"):
        pass
    return text


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


async def _start_accepting(server: asyncio.Server) -> None:
    """Start accepting on a client listener bound earlier (at start-up, so that port 0 resolves before the node
    registers), and check that it listens.

    Until it listens, a bound port is open to a second socket with SO_REUSEADDR (another process on this host given
    the same port, say). Once that one listens, uvloop's `start_serving` fails without an error and closes this
    socket, and the node would go on advertising a port another process serves; it stops instead. Listening at
    bind time would close the window, but the port would then take connections before the node serves them, and
    tools that wait for the port to open (this project's test clusters among them) would take that for ready."""
    ports = ", ".join(str(bound.getsockname()[1]) for bound in server.sockets)
    await server.start_serving()
    if any(bound.fileno() < 0 for bound in server.sockets):
        raise StartupError(f"port {ports} was taken by another process while this node started: "
                           "give each process its own port")
