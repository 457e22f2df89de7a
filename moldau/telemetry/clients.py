"""The broker's side of client telemetry (KIP-714): subscriptions handed out, and the latest push of each client.

`ClientTelemetry` answers GetTelemetrySubscriptions and PushTelemetry and keeps, in memory, the latest push of
each client instance: its attributes, when it pushed, how big the push was, and its decoded data points. It is
bounded: at most `MAX_CLIENTS` instances (the least recently heard from are forgotten first) and
`MAX_POINTS_PER_PUSH` points each, so clients cannot grow the broker's memory. Nothing is written to disk:
subscriptions are durable (config resources in the metadata log), pushed metrics are not.

`clients()` and `latest()` are the read side, for the admin tools and a metrics endpoint.

No I/O; the clock and the instance-id source are injected.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.telemetry import otlp
from moldau.telemetry.subscriptions import ClientAttributes, ClientSubscription, Subscription, from_configs, resolve

MAX_CLIENTS = 1000
MAX_POINTS_PER_PUSH = 2000
MAX_SOFTWARE_ENTRIES = 10_000
# Preferred first, as Kafka lists them: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
_NO_ID = uuid.UUID(int=0)
# A push this much earlier than its interval is still taken: clients jitter their pushes.
_EARLY_PUSH_SLACK = 0.5


@dataclass(slots=True)
class ClientInstance:
    """One client instance as last heard from."""

    instance_id: uuid.UUID
    attributes: ClientAttributes
    subscription: ClientSubscription
    subscribed_ms: int
    last_push_ms: int | None = None
    pushes: int = 0
    last_push_bytes: int = 0
    compression_type: int = 0
    terminated: bool = False
    points: list[otlp.MetricPoint] = field(default_factory=list)
    points_dropped: int = 0


class ClientTelemetry:
    def __init__(self, clock: Clock, max_bytes: Callable[[], int],
                 new_instance_id: Callable[[], uuid.UUID] = uuid.uuid4) -> None:
        self._clock = clock
        self._max_bytes = max_bytes
        self._new_instance_id = new_instance_id
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._software: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._configs: Mapping[tuple[int, str], Mapping[str, str]] | None = None
        self._subscriptions: list[Subscription] = []

    # -- what clients tell about themselves -----------------------------------------------------------------

    def note_software(self, peer: str, name: str | None, version: str | None) -> None:
        """The client software a connection named in ApiVersions (v3+), for `match` on its name and version."""
        if name is None and version is None:
            return
        self._software[peer] = (name or "", version or "")
        self._software.move_to_end(peer)
        while len(self._software) > MAX_SOFTWARE_ENTRIES:
            self._software.popitem(last=False)

    def attributes(self, instance_id: uuid.UUID, client_id: str | None, peer: str) -> ClientAttributes:
        name, version = self._software.get(peer, ("", ""))
        address, _, port = peer.rpartition(":")
        return ClientAttributes(str(instance_id), client_id or "", name, version, address, port)

    # -- the two APIs ---------------------------------------------------------------------------------------

    def subscribe(self, instance_id: uuid.UUID | None, client_id: str | None, peer: str,
                  configs: Mapping[tuple[int, str], Mapping[str, str]]) -> ClientInstance:
        """GetTelemetrySubscriptions: the client's subscription, under a new instance id if it has none."""
        if instance_id is None or instance_id == _NO_ID:
            instance_id = self._new_instance_id()
        attributes = self.attributes(instance_id, client_id, peer)
        subscription = resolve(self._current(configs), attributes)
        known = self._instances.get(instance_id)
        if known is None:
            known = ClientInstance(instance_id, attributes, subscription, self._clock.time_ms())
            self._remember(known)
        else:
            known.attributes, known.subscription = attributes, subscription
            known.subscribed_ms = self._clock.time_ms()
            self._instances.move_to_end(instance_id)
        return known

    def push(self, instance_id: uuid.UUID | None, subscription_id: int, terminating: bool, compression_type: int,
             payload: bytes, configs: Mapping[tuple[int, str], Mapping[str, str]]) -> None:
        """PushTelemetry: check the push as Kafka does and keep it as the instance's latest. Raises KafkaError."""
        if instance_id is None or instance_id == _NO_ID:
            raise KafkaError(ErrorCode.invalid_request, "a push needs the client instance id")
        known = self._instances.get(instance_id)
        if known is None:
            raise KafkaError(ErrorCode.unknown_subscription_id, f"unknown client instance {instance_id}")
        current = resolve(self._current(configs), known.attributes)
        if subscription_id != current.subscription_id:
            raise KafkaError(ErrorCode.unknown_subscription_id,
                             f"subscription {subscription_id} is not the client's current one")
        if known.terminated:
            raise KafkaError(ErrorCode.invalid_request, f"client instance {instance_id} has already terminated")
        now = self._clock.time_ms()
        if not terminating and known.last_push_ms is not None and \
                now - known.last_push_ms < current.interval_ms * _EARLY_PUSH_SLACK:
            raise KafkaError(ErrorCode.throttling_quota_exceeded,
                             f"pushed {now - known.last_push_ms} ms after the last push; the interval is "
                             f"{current.interval_ms} ms")
        if len(payload) > self._max_bytes():
            raise KafkaError(ErrorCode.telemetry_too_large,
                             f"{len(payload)} bytes of metrics are more than telemetry.max.bytes")
        if compression_type not in (0, *ACCEPTED_COMPRESSION_TYPES):
            raise KafkaError(ErrorCode.unsupported_compression_type, f"compression type {compression_type}")
        points = otlp.decode(payload, compression_type, limit=max(self._max_bytes(), 1) * 64)
        known.subscription = current
        known.last_push_ms, known.pushes, known.last_push_bytes = now, known.pushes + 1, len(payload)
        known.compression_type, known.terminated = compression_type, terminating
        known.points, known.points_dropped = points[:MAX_POINTS_PER_PUSH], max(0, len(points) - MAX_POINTS_PER_PUSH)
        self._instances.move_to_end(instance_id)

    # -- the read side --------------------------------------------------------------------------------------

    def clients(self) -> list[ClientInstance]:
        """Every instance remembered, most recently heard from last."""
        return list(self._instances.values())

    def latest(self, instance_id: uuid.UUID) -> ClientInstance | None:
        return self._instances.get(instance_id)

    # -- internals ------------------------------------------------------------------------------------------

    def _current(self, configs: Mapping[tuple[int, str], Mapping[str, str]]) -> list[Subscription]:
        # The image's config map is replaced, never mutated, when configs change: parse once per version.
        if configs is not self._configs:
            self._configs, self._subscriptions = configs, from_configs(configs)
        return self._subscriptions

    def _remember(self, instance: ClientInstance) -> None:
        self._instances[instance.instance_id] = instance
        while len(self._instances) > MAX_CLIENTS:
            self._instances.popitem(last=False)
