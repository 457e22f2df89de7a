"""Controller mutation quotas (KIP-599): how many partitions a client may create or delete per second.

Sans-I/O: every call takes the time (`now_ms`), so tests drive it with numbers.

**What counts.** One mutation per partition created by CreateTopics or CreatePartitions, or deleted by
DeleteTopics. The quota (`controller_mutation_rate`, mutations per second) is found and metered per user /
client-id entity exactly as the other client quotas are (`moldau.security.quotas.resolve`).

**Token bucket.** A rate averaged over sampled windows would hold a client back for a whole span after one large
request (a topic of 500 partitions against a quota of 5 per second), so, as Kafka does, each metered entity has
a bucket instead: it holds at most ``quota x controller.quota.window.num x controller.quota.window.size.seconds``
tokens (the burst), fills at `quota` tokens per second, and starts full. A mutation takes one token; the bucket
may go negative, and while it is the entity is over its quota for ``-tokens / quota`` seconds.

**Strict** (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is admitted only while the
bucket is not negative, and then takes all its tokens: the topic that empties the bucket still goes through, a
burst no larger than one topic. A topic refused is answered THROTTLING_QUOTA_EXCEEDED, and the response's
throttle time says how long until the bucket is back at zero.

**Permissive** (older versions, whose clients do not know that error): every topic is admitted and takes its
tokens; when that leaves the bucket negative, the response carries the time until it is back at zero, and the
connection is muted for it (KIP-219).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["MutationBuckets", "MutationQuota", "MutationQuotaConfig", "TokenBucket"]


@dataclass(frozen=True, slots=True)
class MutationQuotaConfig:
    window_num: int = 11  # controller.quota.window.num
    window_size_ms: int = 1000  # controller.quota.window.size.seconds, in milliseconds

    def burst(self, rate: float) -> float:
        """The most tokens a bucket of `rate` per second holds."""
        return rate * self.window_num * self.window_size_ms / 1000.0


@dataclass(slots=True)
class TokenBucket:
    tokens: float
    updated_ms: float

    def refill(self, rate: float, burst: float, now_ms: float) -> float:
        """Add what `rate` earned since the last update, up to `burst`; the tokens now."""
        elapsed_ms = max(0.0, now_ms - self.updated_ms)
        self.tokens = min(burst, self.tokens + rate * elapsed_ms / 1000.0)
        self.updated_ms = max(self.updated_ms, now_ms)
        return self.tokens

    def wait_ms(self, rate: float) -> int:
        """How long until the bucket is back at zero (0 when it is not negative)."""
        return math.ceil(-self.tokens * 1000.0 / rate) if self.tokens < 0 else 0


_EXPIRY_BATCH = 1000  # buckets added between two sweeps for idle entities


class MutationBuckets:
    """The broker's buckets, one per metered (user, client id) entity."""

    def __init__(self, config: MutationQuotaConfig | None = None) -> None:
        self.config = config or MutationQuotaConfig()
        self._buckets: dict[tuple[str, str], tuple[float, TokenBucket]] = {}
        self._next_expiry = _EXPIRY_BATCH

    def __len__(self) -> int:
        return len(self._buckets)

    def clear(self) -> None:
        self._buckets.clear()

    def quota(self, entity: tuple[str, str], rate: float, strict: bool, now_ms: float) -> MutationQuota:
        """One request's view of `entity`'s bucket under a quota of `rate` mutations per second."""
        burst = self.config.burst(rate)
        found = self._buckets.get(entity)
        if found is None:
            if len(self._buckets) >= self._next_expiry:
                self._expire(now_ms)
            bucket = TokenBucket(burst, now_ms)  # a new entity starts with a full bucket
        else:
            # A changed quota keeps the tokens, capped at the new burst on the next refill.
            bucket = found[1]
        self._buckets[entity] = (rate, bucket)
        return MutationQuota(bucket, rate, burst, strict)

    def _expire(self, now_ms: float) -> None:
        """Forget the buckets that have filled up again: a full bucket is what a new entity gets anyway."""
        for entity in [e for e, (rate, bucket) in self._buckets.items()
                       if bucket.refill(rate, self.config.burst(rate), now_ms) >= self.config.burst(rate)]:
            del self._buckets[entity]
        self._next_expiry = len(self._buckets) + _EXPIRY_BATCH


class MutationQuota:
    """One request's view of a client's controller mutation quota.

    The handler asks `admit` before each topic's mutation (strict mode may refuse it) and `give_back` when the
    topic then fails, so only mutations that happened count; `throttle_ms` is the response's throttle time.
    """

    __slots__ = ("_bucket", "_burst", "_charged", "_refused", "rate", "strict")

    def __init__(self, bucket: TokenBucket, rate: float, burst: float, strict: bool) -> None:
        self._bucket = bucket
        self._burst = burst
        self.rate = rate
        self.strict = strict
        self._charged = False
        self._refused = False

    def admit(self, mutations: int, now_ms: float) -> int:
        """Take `mutations` tokens and return 0; or, strict with the bucket already negative, take nothing and
        return how many milliseconds to wait."""
        tokens = self._bucket.refill(self.rate, self._burst, now_ms)
        if self.strict and tokens < 0:
            self._refused = True
            return self._bucket.wait_ms(self.rate)
        self._bucket.tokens -= mutations
        self._charged = self._charged or mutations > 0
        return 0

    def give_back(self, mutations: int, now_ms: float) -> None:
        """Return the tokens of an admitted topic whose mutation did not happen."""
        self._bucket.refill(self.rate, self._burst, now_ms)
        self._bucket.tokens = min(self._burst, self._bucket.tokens + mutations)

    def throttle_ms(self, now_ms: float) -> int:
        """The response's throttle time: until the bucket is back at zero, when this request refused a topic
        (strict) or took tokens (permissive); else 0."""
        if not (self._refused if self.strict else self._charged):
            return 0
        self._bucket.refill(self.rate, self._burst, now_ms)
        return self._bucket.wait_ms(self.rate)
