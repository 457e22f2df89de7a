"""The client quota core: rate windows, throttle times, precedence of entities, validation."""

from __future__ import annotations

import pytest

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ClientQuotaRecord, decode_record, encode_record
from moldau.security.quotas import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotas,
    QuotaConfig,
    Rate,
    RequestQuota,
    check_entity,
    check_quota,
    entity_key,
    resolve,
)


def test_a_rate_before_its_windows_fill_counts_the_missing_full_windows() -> None:
    rate = Rate(QuotaConfig(window_num=11, window_size_ms=1000))
    rate.record(10_000, now_ms=0)
    # One burst at start: spread over at least 10 full windows, not over the 1 ms since it came.
    assert rate.per_second(0) == pytest.approx(1000.0)
    rate.record(10_000, now_ms=500)
    assert rate.per_second(500) == pytest.approx(20_000 / 10.5)


def test_old_windows_fall_out_of_the_rate() -> None:
    config = QuotaConfig(window_num=3, window_size_ms=1000)
    rate = Rate(config)
    rate.record(9000, now_ms=0)
    for t in (1000, 2000, 3000, 4000):
        rate.record(100, now_ms=t)
    assert len(rate.samples) == 3
    # Windows starting at 2000, 3000, 4000 remain: 300 bytes over 2 s.
    assert rate.per_second(4000) == pytest.approx(150.0)


def test_throttle_is_the_time_for_the_rate_to_fall_back_to_the_quota() -> None:
    config = QuotaConfig(window_num=11, window_size_ms=1000)
    rate = Rate(config)
    rate.record(20_000, now_ms=0)  # 2000 B/s over the 10 s span
    # (2000 - 1000) / 1000 * 10 s = 10 s of silence brings it back to 1000 B/s: 20000 B over 20 s.
    assert rate.throttle_ms(1000, now_ms=0) == 10_000
    assert rate.throttle_ms(2000, now_ms=0) == 0
    assert rate.throttle_ms(4000, now_ms=0) == 0


def test_throttle_is_capped_at_one_full_span() -> None:
    config = QuotaConfig(window_num=2, window_size_ms=1000)
    rate = Rate(config)
    rate.record(10**9, now_ms=0)
    assert rate.throttle_ms(1, now_ms=0) == config.span_ms


QUOTAS = {
    entity_key("alice", "app"): {PRODUCER_BYTE_RATE: 1.0},
    entity_key("alice", None): {PRODUCER_BYTE_RATE: 2.0},
    entity_key("alice"): {PRODUCER_BYTE_RATE: 3.0},
    entity_key(None, "app"): {PRODUCER_BYTE_RATE: 4.0},
    entity_key(None, None): {PRODUCER_BYTE_RATE: 5.0},
    entity_key(None): {PRODUCER_BYTE_RATE: 6.0},
    entity_key(client_id="app"): {PRODUCER_BYTE_RATE: 7.0},
    entity_key(client_id=None): {PRODUCER_BYTE_RATE: 8.0},
}


def test_precedence_follows_kafkas_eight_levels() -> None:
    quotas = dict(QUOTAS)
    expected = [
        (1.0, ("alice", "app")), (2.0, ("alice", "app")), (3.0, ("alice", "")), (4.0, ("alice", "app")),
        (5.0, ("alice", "app")), (6.0, ("alice", "")), (7.0, ("", "app")), (8.0, ("", "app")),
    ]
    for level, (key, _) in enumerate(list(quotas.items())):
        assert resolve(quotas, PRODUCER_BYTE_RATE, "alice", "app") == expected[level]
        del quotas[key]
    assert resolve(quotas, PRODUCER_BYTE_RATE, "alice", "app") is None


def test_a_quota_of_another_type_or_entity_does_not_apply() -> None:
    quotas = {entity_key(client_id="other"): {PRODUCER_BYTE_RATE: 1.0},
              entity_key(client_id="app"): {CONSUMER_BYTE_RATE: 1.0}}
    assert resolve(quotas, PRODUCER_BYTE_RATE, "ANONYMOUS", "app") is None


def test_a_default_client_quota_gives_each_client_its_own_allowance_a_user_quota_is_shared() -> None:
    quotas = ClientQuotas(QuotaConfig(window_num=2, window_size_ms=1000))
    quotas.update({entity_key(client_id=None): {PRODUCER_BYTE_RATE: 1000.0},
                   entity_key("bob"): {PRODUCER_BYTE_RATE: 1000.0}})
    assert quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "a", 1000, 0) == 0
    assert quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "b", 1000, 0) == 0  # its own window
    assert quotas.record(PRODUCER_BYTE_RATE, "bob", "a", 1000, 0) == 0
    assert quotas.record(PRODUCER_BYTE_RATE, "bob", "b", 1000, 0) > 0  # shares bob's


def test_without_quotas_nothing_is_recorded_or_throttled() -> None:
    quotas = ClientQuotas()
    assert quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 10**12, 0) == 0
    assert not quotas.enabled
    assert RequestQuota(None).record(PRODUCER_BYTE_RATE, 10**12) == 0


def test_a_request_keeps_the_largest_throttle_it_earned() -> None:
    quotas = ClientQuotas(QuotaConfig(window_num=2, window_size_ms=1000))
    quotas.update({entity_key(client_id="app"): {PRODUCER_BYTE_RATE: 100.0, REQUEST_PERCENTAGE: 50.0}})
    request = RequestQuota(quotas, "ANONYMOUS", "app", now_ms=0)
    assert request.record(PRODUCER_BYTE_RATE, 300) == 2000
    assert request.record(CONSUMER_BYTE_RATE, 10**9) == 0  # no consumer quota
    assert request.throttle_ms == 2000


def test_validation_refuses_what_kafka_refuses() -> None:
    assert check_entity([("user", "alice"), ("client-id", None)]) == (("client-id", None), ("user", "alice"))
    for bad in ([], [("ip", "1.2.3.4"), ("user", "a")], [("ip", "example.com")], [("user", "a"), ("user", "b")],
                [("user", "")], [("group", "g")]):
        with pytest.raises(ValueError):
            check_entity(bad)
    check_quota(PRODUCER_BYTE_RATE, 1024)
    check_quota(REQUEST_PERCENTAGE, 12.5)
    for key, value in (("bogus", 1.0), (PRODUCER_BYTE_RATE, 0.0), (PRODUCER_BYTE_RATE, 1.5),
                       (CONSUMER_BYTE_RATE, float("nan"))):
        with pytest.raises(ValueError):
            check_quota(key, value)


def test_ip_entities_take_the_connection_creation_rate_only() -> None:
    """KIP-612: an ip entity (an address, or the default) sets connection_creation_rate, a whole number >= 0, and
    nothing else; user and client-id entities cannot set it."""
    assert check_entity([("ip", "10.0.0.7")]) == (("ip", "10.0.0.7"),)
    assert check_entity([("ip", "::1")]) == (("ip", "::1"),)
    assert check_entity([("ip", None)]) == (("ip", None),)
    ip = (("ip", "10.0.0.7"),)
    check_quota(CONNECTION_CREATION_RATE, 10, ip)
    check_quota(CONNECTION_CREATION_RATE, 0, ip)
    for key, value, entity in ((CONNECTION_CREATION_RATE, 1.5, ip), (CONNECTION_CREATION_RATE, -1, ip),
                               (CONNECTION_CREATION_RATE, 2.0**31, ip), (PRODUCER_BYTE_RATE, 100, ip),
                               (CONNECTION_CREATION_RATE, 10, entity_key(user="alice"))):
        with pytest.raises(ValueError):
            check_quota(key, value, entity)


def test_ip_quotas_alone_leave_request_metering_off() -> None:
    quotas = ClientQuotas()
    quotas.update({(("ip", None),): {CONNECTION_CREATION_RATE: 5.0}})
    assert not quotas.enabled
    assert quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 10**12, 0) == 0
    quotas.update({(("ip", None),): {CONNECTION_CREATION_RATE: 5.0}, entity_key(client_id="app"): {
        PRODUCER_BYTE_RATE: 100.0}})
    assert quotas.enabled


def test_quota_records_round_trip_and_replay_into_the_image_and_its_snapshot() -> None:
    entity = entity_key("alice", None)
    records = [ClientQuotaRecord(entity, PRODUCER_BYTE_RATE, 1024.0),
               ClientQuotaRecord(entity, CONSUMER_BYTE_RATE, 2048.0),
               ClientQuotaRecord(entity_key(client_id="x"), PRODUCER_BYTE_RATE, 1.0),
               ClientQuotaRecord(entity_key(client_id="x"), PRODUCER_BYTE_RATE, 0.0, remove=True)]
    assert [decode_record(encode_record(r)) for r in records] == records
    image = MetadataImage().apply(records, 3)
    assert dict(image.client_quotas) == {entity: {PRODUCER_BYTE_RATE: 1024.0, CONSUMER_BYTE_RATE: 2048.0}}
    rebuilt = MetadataImage().apply(image.to_records(), 3)
    assert rebuilt.client_quotas == image.client_quotas


def test_rates_of_clients_silent_for_a_span_are_forgotten() -> None:
    quotas = ClientQuotas(QuotaConfig(window_num=2, window_size_ms=1000))
    quotas.update({entity_key(client_id=None): {PRODUCER_BYTE_RATE: 1000.0}})
    for i in range(1000):
        quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", f"client-{i}", 10, 0)
    quotas.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "late", 10, 5000)  # the others were silent for 5 s
    assert len(quotas._rates) == 1
