"""The controller mutation quota core (KIP-599): token buckets, strict and permissive mode, metered entities."""

from __future__ import annotations

import pytest

from moldau.security.mutation_quota import MutationBuckets, MutationQuotaConfig, TokenBucket
from moldau.security.quotas import CONTROLLER_MUTATION_RATE, ClientQuotas, RequestQuota, entity_key

CONFIG = MutationQuotaConfig(window_num=10, window_size_ms=1000)  # burst: 10 s of the quota


def test_a_bucket_holds_the_quota_times_the_windows_and_fills_at_the_quota() -> None:
    assert CONFIG.burst(5.0) == 50.0
    assert MutationQuotaConfig(window_num=2, window_size_ms=500).burst(10.0) == 10.0
    bucket = TokenBucket(tokens=-20.0, updated_ms=0)
    assert bucket.refill(rate=10.0, burst=100.0, now_ms=1500) == pytest.approx(-5.0)
    assert bucket.wait_ms(10.0) == 500
    assert bucket.refill(rate=10.0, burst=100.0, now_ms=60_000) == 100.0  # never above the burst
    assert bucket.wait_ms(10.0) == 0
    # A clock read earlier than the last update earns nothing and does not move the update time back.
    assert bucket.refill(rate=10.0, burst=100.0, now_ms=1000) == 100.0
    assert bucket.updated_ms == 60_000


def test_strict_admits_until_the_bucket_is_negative_the_topic_that_crosses_it_included() -> None:
    buckets = MutationBuckets(CONFIG)
    quota = buckets.quota(("", "c"), 10.0, strict=True, now_ms=0)  # 100 tokens
    assert quota.admit(90, now_ms=0) == 0  # 10 left
    assert quota.admit(90, now_ms=0) == 0  # the bucket was not negative: accepted, -80 now (a burst)
    assert quota.throttle_ms(0) == 0  # nothing refused: no throttle, as in Kafka's strict mode
    assert quota.admit(1, now_ms=0) == 8000  # refused: 80 tokens at 10 per second
    assert quota.throttle_ms(0) == 8000
    assert quota.throttle_ms(3000) == 5000  # the throttle time shrinks as the bucket fills
    later = buckets.quota(("", "c"), 10.0, strict=True, now_ms=8000)
    assert later.admit(5, now_ms=8000) == 0  # back at zero: admitted again
    assert later.admit(5, now_ms=8000) == 500


def test_permissive_admits_everything_and_throttles_once_the_bucket_is_negative() -> None:
    quota = MutationBuckets(CONFIG).quota(("", "c"), 10.0, strict=False, now_ms=0)
    assert quota.admit(60, now_ms=0) == 0
    assert quota.throttle_ms(0) == 0  # 40 tokens left
    assert quota.admit(60, now_ms=0) == 0
    assert quota.admit(60, now_ms=0) == 0  # never refused
    assert quota.throttle_ms(0) == 8000  # -80 tokens
    assert quota.throttle_ms(2000) == 6000


def test_a_failed_topic_gives_its_partitions_back() -> None:
    buckets = MutationBuckets(CONFIG)
    quota = buckets.quota(("", "c"), 10.0, strict=True, now_ms=0)
    assert quota.admit(150, now_ms=0) == 0
    quota.give_back(150, now_ms=0)
    assert quota.admit(100, now_ms=0) == 0  # as if the failed topic had never been asked for
    assert quota.admit(1, now_ms=0) == 0  # exactly empty is not negative
    assert quota.admit(1, now_ms=0) == 100
    quota.give_back(1000, now_ms=0)  # never above the burst
    assert buckets.quota(("", "c"), 10.0, strict=False, now_ms=0).admit(101, now_ms=0) == 0
    assert buckets.quota(("", "c"), 10.0, strict=True, now_ms=0).admit(1, now_ms=0) == 100


def test_a_request_that_takes_nothing_is_not_throttled_by_an_earlier_one() -> None:
    buckets = MutationBuckets(CONFIG)
    buckets.quota(("", "c"), 10.0, strict=False, now_ms=0).admit(200, now_ms=0)
    assert buckets.quota(("", "c"), 10.0, strict=False, now_ms=0).throttle_ms(0) == 0
    assert buckets.quota(("", "c"), 10.0, strict=True, now_ms=0).throttle_ms(0) == 0


def test_a_changed_quota_keeps_the_tokens_capped_at_the_new_burst() -> None:
    buckets = MutationBuckets(CONFIG)
    buckets.quota(("", "c"), 10.0, strict=True, now_ms=0).admit(30, now_ms=0)  # 70 of 100 left
    lower = buckets.quota(("", "c"), 2.0, strict=True, now_ms=0)  # burst 20
    assert lower.admit(21, now_ms=0) == 0
    assert lower.admit(1, now_ms=0) == 500  # -1 token at 2 per second


def test_entities_have_their_own_buckets_and_full_ones_are_forgotten() -> None:
    buckets = MutationBuckets(CONFIG)
    buckets.quota(("", "a"), 1.0, strict=True, now_ms=0).admit(20, now_ms=0)
    assert buckets.quota(("", "b"), 1.0, strict=True, now_ms=0).admit(10, now_ms=0) == 0  # b is not a
    assert buckets.quota(("", "a"), 1.0, strict=True, now_ms=0).admit(1, now_ms=0) == 10_000
    for i in range(1000):
        buckets.quota(("", f"idle-{i}"), 1.0, strict=True, now_ms=0)
    # The 1000th bucket made a sweep: the full (untouched) ones went, a (negative) and b (not yet full) stayed.
    assert len(buckets) == 4  # a, b and the two idle buckets added after the sweep
    assert buckets.quota(("", "a"), 1.0, strict=True, now_ms=0).admit(1, now_ms=0) == 10_000
    assert buckets.quota(("", "b"), 1.0, strict=True, now_ms=0).admit(1, now_ms=0) == 0


def test_client_quotas_meter_mutations_per_entity_with_the_usual_precedence() -> None:
    quotas = ClientQuotas(mutation_config=CONFIG)
    assert quotas.mutation_quota("alice", "app", strict=True, now_ms=0) is None
    quotas.update({entity_key("alice"): {CONTROLLER_MUTATION_RATE: 1.0},
                   entity_key(client_id=None): {CONTROLLER_MUTATION_RATE: 100.0}})
    # A user quota is shared by all the user's client ids.
    first = quotas.mutation_quota("alice", "app-1", strict=True, now_ms=0)
    assert first is not None and first.rate == 1.0
    assert first.admit(11, now_ms=0) == 0
    second = quotas.mutation_quota("alice", "app-2", strict=True, now_ms=0)
    assert second is not None and second.admit(1, now_ms=0) == 1000
    # The default client-id quota gives each client id its own bucket.
    other = quotas.mutation_quota("bob", "tool", strict=True, now_ms=0)
    assert other is not None and other.rate == 100.0 and other.admit(1, now_ms=0) == 0
    quotas.update({})
    assert quotas.mutation_quota("alice", "app-1", strict=True, now_ms=0) is None
    assert len(quotas.mutations) == 0


def test_a_request_passes_its_mutation_throttle_on() -> None:
    quotas = ClientQuotas(mutation_config=CONFIG)
    quotas.update({entity_key(client_id="c"): {CONTROLLER_MUTATION_RATE: 10.0}})
    request = RequestQuota(quotas, "", "c", now_ms=0)
    quota = request.mutation_quota(strict=False)
    assert quota is not None and not quota.strict
    quota.admit(150, now_ms=0)
    request.throttle(quota.throttle_ms(0))
    assert request.throttle_ms == 5000
    request.throttle(10)  # keeps the largest
    assert request.throttle_ms == 5000
    assert RequestQuota(quotas, "", "other", now_ms=0).mutation_quota(strict=True) is None
    assert RequestQuota(None).mutation_quota(strict=True) is None
