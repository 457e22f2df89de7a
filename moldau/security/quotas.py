"""Client quotas: which quota applies to a request, how fast a client goes, and how long to throttle it.

Sans-I/O: nothing here reads a clock or a socket; every call takes the time (`now_ms`), so tests drive it with
numbers. The broker owns one `ClientQuotas`, fed the metadata image's quota entries.

**Entities and precedence** (KIP-55). A quota is set on a user, a client id, or a user and client id pair,
each of which may be the default (`<default>`, a None name here). For a request of user U and client id C the
first of these that sets the quota type wins:

1. user U, client C          5. default user, default client
2. user U, default client    6. default user
3. user U                    7. client C
4. default user, client C    8. default client

The quota found is counted per *quota entity*: the parts of (user, client id) the matching entry names,
defaults standing for the request's own value. A quota on user U is shared by all of U's client ids; a
default client-id quota gives every client id its own allowance.

**Rates** (KIP-13). A rate is the sum of what was recorded over the last `quota.window.num` windows of
`quota.window.size.seconds`, divided by the time they span; a sampling that has not yet filled its windows
counts as if the missing full windows were there, so one burst after a quiet start is not seen as an infinite
rate. When the observed rate exceeds the quota, the client is throttled for the time it takes that rate to fall
back to the quota if nothing more comes: ``(rate - quota) / quota * span``, capped at one full span.

**Request share** (`request_percentage`): the time spent handling the client's requests, as a percentage of one
request-handling thread, is measured the same way (the recorded value is handler time in milliseconds; a
quota of 100 is all of one thread's time).

**Partition mutations** (`controller_mutation_rate`) are metered with a token bucket instead, in strict or
permissive mode (`moldau.security.mutation_quota`).
"""

from __future__ import annotations

import enum
import ipaddress
import math
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.security.mutation_quota import MutationBuckets, MutationQuota, MutationQuotaConfig

__all__ = [
    "ABSENT",
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "IP",
    "IP_QUOTA_KEYS",
    "NO_QUOTA",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "USER",
    "ClientQuotas",
    "Entity",
    "QuotaConfig",
    "Rate",
    "RequestQuota",
    "TimedCoroutine",
    "check_entity",
    "check_quota",
    "entity_key",
    "is_ip_entity",
    "quota_keys",
    "resolve",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
# KIP-612: new connections per second from one IP address (an `ip` entity's only quota), enforced on accept
# (`moldau.security.connection_quotas`).
CONNECTION_CREATION_RATE = "connection_creation_rate"
IP_QUOTA_KEYS = (CONNECTION_CREATION_RATE,)

# A quota entity as stored: sorted (entity type, name) pairs, a None name being the default.
Entity = tuple[tuple[str, str | None], ...]


class _Absent(enum.Enum):
    ABSENT = 0


ABSENT = _Absent.ABSENT


def entity_key(user: str | _Absent | None = ABSENT, client_id: str | _Absent | None = ABSENT) -> Entity:
    """The entity naming `user` and/or `client_id` (None: the default; ABSENT: not part of the entity)."""
    parts: list[tuple[str, str | None]] = []
    if not isinstance(client_id, _Absent):
        parts.append((CLIENT_ID, client_id))
    if not isinstance(user, _Absent):
        parts.append((USER, user))
    return tuple(sorted(parts, key=lambda p: p[0]))


def _levels(user: str, client_id: str) -> list[tuple[Entity, tuple[str, str]]]:
    """The eight entities in precedence order, each with the quota entity (user, client id) it meters."""
    return [
        (entity_key(user, client_id), (user, client_id)),
        (entity_key(user, None), (user, client_id)),
        (entity_key(user), (user, "")),
        (entity_key(None, client_id), (user, client_id)),
        (entity_key(None, None), (user, client_id)),
        (entity_key(None), (user, "")),
        (entity_key(client_id=client_id), ("", client_id)),
        (entity_key(client_id=None), ("", client_id)),
    ]


def resolve(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
            ) -> tuple[float, tuple[str, str]] | None:
    """The quota of type `key` for a request of `user` and `client_id`, with the quota entity it is counted
    against, or None when no entry sets it."""
    for entity, metered in _levels(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], metered
    return None


@dataclass(frozen=True, slots=True)
class QuotaConfig:
    window_num: int = 11  # quota.window.num
    window_size_ms: int = 1000  # quota.window.size.seconds, in milliseconds

    @property
    def span_ms(self) -> int:
        return self.window_num * self.window_size_ms


@dataclass(slots=True)
class _Sample:
    start_ms: float
    value: float = 0.0


@dataclass(slots=True)
class Rate:
    """Recorded values over the last `window_num` windows of `window_size_ms`."""

    config: QuotaConfig
    samples: list[_Sample] = field(default_factory=list)

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        current = self.samples[-1] if self.samples else None
        if current is None or now_ms >= current.start_ms + self.config.window_size_ms:
            current = _Sample(now_ms)
            self.samples.append(current)
            if len(self.samples) > self.config.window_num:
                del self.samples[0]
        current.value += value

    def _purge(self, now_ms: float) -> None:
        # A window that started a whole span ago no longer counts.
        while self.samples and now_ms - self.samples[0].start_ms >= self.config.span_ms:
            del self.samples[0]

    def span_ms(self, now_ms: float) -> float:
        """The time the samples cover, counting at least `window_num - 1` full windows."""
        window = self.config.window_size_ms
        elapsed = now_ms - self.samples[0].start_ms if self.samples else 0.0
        full_windows = int(elapsed // window)
        minimum = self.config.window_num - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * window
        return max(elapsed, 1.0)

    def per_second(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total * 1000.0 / self.span_ms(now_ms)

    def throttle_ms(self, quota_per_second: float, now_ms: float) -> int:
        """How long until the rate is back at the quota if nothing more is recorded; 0 when within it."""
        rate = self.per_second(now_ms)
        if quota_per_second <= 0 or rate <= quota_per_second:
            return 0
        throttle = (rate - quota_per_second) / quota_per_second * self.span_ms(now_ms)
        return min(math.ceil(throttle), self.config.span_ms)


_EXPIRY_BATCH = 1000  # rates added between two sweeps for silent clients


class ClientQuotas:
    """The broker's client quotas: the configured entries, a rate per (quota type, quota entity), and the token
    buckets of the controller mutation quota.

    `record` adds to the rate of the entity the request is counted against and returns the throttle time in
    milliseconds (0 without a quota: then nothing is recorded, so an unconfigured broker keeps no state).
    """

    def __init__(self, config: QuotaConfig | None = None, mutation_config: MutationQuotaConfig | None = None
                 ) -> None:
        self.config = config or QuotaConfig()
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self._enabled = False  # some user or client-id entity sets a quota (ip entities are the acceptor's)
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._next_expiry = _EXPIRY_BATCH
        self.mutations = MutationBuckets(mutation_config)

    def _expire(self, now_ms: float) -> None:
        """Forget the rates of clients silent for a whole span (a default client-id quota makes one per id)."""
        span = self.config.span_ms
        self._rates = {k: r for k, r in self._rates.items() if r.samples and now_ms - r.samples[-1].start_ms < span}
        self._next_expiry = len(self._rates) + _EXPIRY_BATCH

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """Take the entries of a new metadata image; rates of entities no longer limited are dropped."""
        if quotas is self._quotas:
            return
        self._quotas = quotas
        self._enabled = any(not is_ip_entity(entity) for entity in quotas)
        if not self._enabled:
            self._rates.clear()
            self.mutations.clear()

    @property
    def enabled(self) -> bool:
        return self._enabled

    def quota(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        return resolve(self._quotas, key, user, client_id) if self._enabled else None

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: float) -> int:
        found = self.quota(key, user, client_id)
        if found is None:
            return 0
        limit, (metered_user, metered_client) = found
        if key == REQUEST_PERCENTAGE:
            limit = limit * 10.0  # percent of one thread -> milliseconds of handling per second
        rate = self._rates.get((key, metered_user, metered_client))
        if rate is None:
            if len(self._rates) >= self._next_expiry:
                self._expire(now_ms)
            rate = self._rates[(key, metered_user, metered_client)] = Rate(self.config)
        rate.record(value, now_ms)
        return rate.throttle_ms(limit, now_ms)

    def mutation_quota(self, user: str, client_id: str, strict: bool, now_ms: float) -> MutationQuota | None:
        """The request's view of its client's `controller_mutation_rate` bucket; None without that quota."""
        found = self.quota(CONTROLLER_MUTATION_RATE, user, client_id)
        if found is None:
            return None
        limit, metered = found
        return self.mutations.quota(metered, limit, strict, now_ms)

    def entities(self) -> Iterable[Entity]:
        return self._quotas.keys()


_INTEGRAL = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})


def check_entity(entity: Iterable[tuple[str, str | None]]) -> Entity:
    """The stored form of an entity from (type, name) pairs; raises ValueError for what Kafka refuses."""
    pairs = list(entity)
    types = [entity_type for entity_type, _ in pairs]
    if not pairs:
        raise ValueError("the entity is empty")
    if len(set(types)) != len(types):
        raise ValueError(f"entity type named more than once: {', '.join(types)}")
    for entity_type, name in pairs:
        if entity_type not in (USER, CLIENT_ID, IP):
            raise ValueError(f"unsupported entity type {entity_type!r} (user, client-id and ip are)")
        if name is not None and entity_type == USER and not name:
            raise ValueError("an empty user name is not allowed")
        if name is not None and entity_type == IP:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise ValueError(f"{name!r} is not an IP address (an ip entity names one, or the default)") from None
    if IP in types and len(pairs) > 1:
        raise ValueError("an ip entity cannot be combined with user or client-id")
    return tuple(sorted(pairs, key=lambda p: p[0]))


def is_ip_entity(entity: Entity) -> bool:
    return len(entity) == 1 and entity[0][0] == IP


def quota_keys(entity: Entity) -> tuple[str, ...]:
    """The quotas this entity may set: connection_creation_rate for an ip, the client quotas otherwise."""
    return IP_QUOTA_KEYS if is_ip_entity(entity) else QUOTA_KEYS


def check_quota(key: str, value: float, entity: Entity = ()) -> None:
    """Raises ValueError for a quota the entity cannot set or a value it cannot take."""
    known = quota_keys(entity)
    if key not in known:
        kind = "an ip entity" if is_ip_entity(entity) else "a user or client-id entity"
        raise ValueError(f"unknown quota {key!r} for {kind} (known: {', '.join(known)})")
    if key == CONNECTION_CREATION_RATE:  # Kafka's INT, at least 0 (0 refuses every new connection)
        if not math.isfinite(value) or value < 0 or value != int(value) or value > 2**31 - 1:
            raise ValueError(f"{key} is a whole number of connections per second, at least 0, not {value}")
        return
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a positive number, not {value}")
    if key in _INTEGRAL and value != int(value):
        raise ValueError(f"{key} is a whole number of bytes per second, not {value}")


class RequestQuota:
    """One request's view of the client quotas: what the handler records, and the throttle time it earned.

    Dispatch gives each request one (`RequestContext.quota`) when quotas are configured; the handler records
    its bytes (`record`) and puts the returned throttle time in its response's `throttle_time_ms`; dispatch then
    mutes the connection for `throttle_ms` after the response (KIP-219). `NO_QUOTA` records nothing.
    """

    __slots__ = ("_client_id", "_now_ms", "_quotas", "_user", "throttle_ms")

    def __init__(self, quotas: ClientQuotas | None, user: str = "", client_id: str = "", now_ms: float = 0.0
                 ) -> None:
        self._quotas = quotas
        self._user = user
        self._client_id = client_id
        self._now_ms = now_ms
        self.throttle_ms = 0

    def limits(self, key: str) -> bool:
        """Whether a quota of type `key` applies to this request's client."""
        return self._quotas is not None and self._quotas.quota(key, self._user, self._client_id) is not None

    def record(self, key: str, value: float, now_ms: float | None = None) -> int:
        """Count `value` against the client's quota `key`; the throttle time in ms (0: within its quota)."""
        if self._quotas is None:
            return 0
        when = self._now_ms if now_ms is None else now_ms
        throttle = self._quotas.record(key, self._user, self._client_id, value, when)
        self.throttle(throttle)
        return throttle

    def mutation_quota(self, strict: bool, now_ms: float | None = None) -> MutationQuota | None:
        """The client's controller mutation quota for this request (strict or permissive); None without one."""
        if self._quotas is None:
            return None
        return self._quotas.mutation_quota(self._user, self._client_id, strict,
                                           self._now_ms if now_ms is None else now_ms)

    def throttle(self, throttle_ms: int) -> None:
        """Throttle the client for at least `throttle_ms` after this request's response."""
        self.throttle_ms = max(self.throttle_ms, throttle_ms)


NO_QUOTA = RequestQuota(None)


class TimedCoroutine:
    """Awaits a coroutine and adds up the time it spends running, not the time it waits (`elapsed_ms`).

    `request_percentage` is the share of request-handling time a client takes. Kafka measures the time its
    threads spend on the client's requests; on one event loop, the equivalent is the time the handler's
    coroutine runs between its suspensions: a long-polling Fetch or a Produce waiting for acks costs nothing
    while it waits. `now_ms` is the clock (injected, so tests can drive it).
    """

    def __init__(self, awaitable: Awaitable[Any], now_ms: Callable[[], float]) -> None:
        self._steps: Generator[Any, Any, Any] = awaitable.__await__()
        self._now_ms = now_ms
        self.elapsed_ms = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._steps
        send_value: Any = None
        error: BaseException | None = None
        while True:
            started = self._now_ms()
            try:
                yielded = steps.send(send_value) if error is None else steps.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.elapsed_ms += self._now_ms() - started
            try:
                send_value, error = (yield yielded), None
            except BaseException as exc:  # cancellation, for one: passed on to the coroutine
                send_value, error = None, exc
