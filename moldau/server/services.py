"""What request handlers may use of the node: the services interface.

Handlers see the node only through `BrokerServices` (as `ctx.broker`), never through the `Broker` class that
assembles it, so a handler can be run in a test with a fake that provides just what that handler reads (see
tests/unit/server). `Broker` satisfies this protocol structurally; mypy checks it where the dispatcher is built.

Everything here is either state a handler reads (identity, config, the metadata image, the clock) or one of the
subsystems it calls (replicas, coordinators, the controller and its quorum, log directories), plus the few things
that need the node's connections to other nodes (forwarding to the active controller, creating topics through it,
producer id blocks). Add to it only what a handler needs; wiring stays in `Broker`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from moldau.clock import Clock
    from moldau.config import BrokerConfig
    from moldau.coordinator.group.runtime import GroupRuntime
    from moldau.coordinator.share.coordinator import ShareCoordinator
    from moldau.coordinator.txn.runtime import TxnRuntime
    from moldau.metadata.controller import Controller
    from moldau.metadata.image import MetadataImage
    from moldau.metadata.quorum import MetadataQuorum
    from moldau.metadata.records import Endpoint, RegisterBrokerRecord
    from moldau.metrics.counters import BrokerCounters
    from moldau.registry.validation import SchemaLookup
    from moldau.replication.log_dir_mover import LogDirMover
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.server.context import RequestContext
    from moldau.server.fetch_sessions import FetchSessionCache
    from moldau.server.listener_tls import ListenerTlsReloader
    from moldau.server.share_state_links import ShareStateLinks
    from moldau.server.txn_links import TxnLinks
    from moldau.share.manager import ShareGroups
    from moldau.storage.log_manager import LogManager
    from moldau.telemetry.clients import ClientTelemetry


class BrokerServices(Protocol):
    """The node as its request handlers see it."""

    # -- identity, configuration and time --------------------------------------------------------------------
    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def closing(self) -> bool: ...
    @property
    def counters(self) -> BrokerCounters: ...  # records, bytes and requests, for /metrics

    # -- metadata ---------------------------------------------------------------------------------------------
    @property
    def image(self) -> MetadataImage: ...
    @property
    def quorum(self) -> MetadataQuorum: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def listener_tls(self) -> ListenerTlsReloader: ...  # the TLS listeners' key and trust stores
    def endpoint_for(self, registration: RegisterBrokerRecord, listener: str = "") -> Endpoint | None: ...

    # -- partitions and their storage ---------------------------------------------------------------------------
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def log_dir_mover(self) -> LogDirMover: ...  # AlterReplicaLogDirs
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...  # incremental fetch sessions (KIP-227)
    @property
    def fetch_max_bytes(self) -> int: ...  # fetch.max.bytes, read once (read-only)
    @property
    def config_turned_off_apis(self) -> Mapping[int, str]: ...  # API key -> why this broker's config turns it off

    # -- coordinators -----------------------------------------------------------------------------------------
    @property
    def groups(self) -> GroupRuntime: ...
    @property
    def share(self) -> ShareGroups: ...
    @property
    def share_state(self) -> ShareCoordinator: ...
    @property
    def share_state_links(self) -> ShareStateLinks: ...
    @property
    def txn(self) -> TxnRuntime: ...
    @property
    def txn_links(self) -> TxnLinks: ...
    async def ensure_offsets_topic(self, timeout_s: float = 10.0) -> None: ...
    async def ensure_transaction_topic(self, timeout_s: float = 10.0) -> None: ...
    async def next_producer_id(self) -> int: ...

    # -- client telemetry (KIP-714) -------------------------------------------------------------------------
    @property
    def client_telemetry(self) -> ClientTelemetry: ...

    # -- the schema registry ------------------------------------------------------------------------------------
    @property
    def schema_lookup(self) -> SchemaLookup | None: ...
    async def catch_up_schemas(self, schema_ids: Iterable[int]) -> None: ...

    # -- the active controller ----------------------------------------------------------------------------------
    async def forward_to_controller(self, ctx: RequestContext, request: Any) -> Any: ...
    async def forward_enveloped(self, ctx: RequestContext, request: Any) -> Any: ...  # as the client (Envelope)
    async def auto_create_topic(self, name: str) -> None: ...
