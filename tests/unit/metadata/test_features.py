"""Feature levels: UpdateFeatures' validation, the controller committing levels, the image and its snapshot,
and UnregisterBroker in the controller."""

from __future__ import annotations

import uuid

import pytest

from moldau.metadata import features
from moldau.metadata.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, check_update, finalized
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FeatureLevelRecord, decode_record, encode_record
from moldau.protocol.errors import ErrorCode, KafkaError
from tests.unit.metadata.test_reassignment import controller, run


def refused(current: dict[str, int], name: str, level: int, upgrade_type: int) -> str:
    with pytest.raises(KafkaError) as info:
        check_update(current, name, level, upgrade_type)
    assert info.value.code == ErrorCode.invalid_update_version
    return info.value.message


def test_defaults_are_a_fresh_kafka_4_2_clusters() -> None:
    levels = finalized({})
    assert levels["metadata.version"] == 29 and levels["group.version"] == 1 and levels["share.version"] == 1
    assert levels["transaction.version"] == 0 and levels["kraft.version"] == 0


def test_validation_follows_kafkas_rules() -> None:
    assert "does not support" in refused({}, "no.such.feature", 1, UPGRADE)
    assert "outside the supported range" in refused({}, "group.version", 2, UPGRADE)
    assert "no per-transaction epoch bump" in refused({}, "transaction.version", 2, UPGRADE)
    assert "lower level" in refused({}, "group.version", 0, UPGRADE)
    assert "higher level" in refused({"group.version": 0}, "group.version", 1, SAFE_DOWNGRADE)
    assert "unknown upgrade type" in refused({}, "group.version", 1, 9)
    assert "cannot be below" in refused({}, "metadata.version", 0, SAFE_DOWNGRADE)
    assert "unsafe" in refused({}, "metadata.version", 27, UNSAFE_DOWNGRADE)
    # 4.0-IV1 (23) changed the metadata format: a safe downgrade below it is refused, above it allowed.
    assert "4.0-IV1" in refused({}, "metadata.version", 22, SAFE_DOWNGRADE)
    check_update({}, "metadata.version", 23, SAFE_DOWNGRADE)
    check_update({"metadata.version": 23}, "metadata.version", 29, UPGRADE)
    check_update({}, "group.version", 0, SAFE_DOWNGRADE)
    check_update({}, "group.version", 1, UPGRADE)  # the current level: nothing to refuse


def test_the_controller_commits_all_or_nothing() -> None:
    ctl, quorum = controller([1], [])
    with pytest.raises(KafkaError):
        run(ctl.update_features([("group.version", 0, SAFE_DOWNGRADE), ("share.version", 5, UPGRADE)], False))
    assert quorum.entries == []
    run(ctl.update_features([("group.version", 0, SAFE_DOWNGRADE)], True))  # validate only
    assert quorum.entries == []
    run(ctl.update_features([("group.version", 0, SAFE_DOWNGRADE), ("metadata.version", 27, SAFE_DOWNGRADE)], False))
    assert quorum.entries == [[FeatureLevelRecord("group.version", 0), FeatureLevelRecord("metadata.version", 27)]]
    assert finalized(quorum.image.features)["group.version"] == 0  # 0 is kept: off, not "the default"
    with pytest.raises(KafkaError) as info:
        run(ctl.update_features([("group.version", 1, UPGRADE), ("group.version", 0, SAFE_DOWNGRADE)], False))
    assert info.value.code == ErrorCode.invalid_request


def test_levels_survive_a_snapshot_and_the_record_encoding() -> None:
    image = MetadataImage().apply([FeatureLevelRecord("metadata.version", 25), FeatureLevelRecord("share.version", 0)],
                                  1)
    rebuilt = MetadataImage().apply([decode_record(encode_record(r)) for r in image.to_records()], 1)
    assert dict(rebuilt.features) == {"metadata.version": 25, "share.version": 0}
    assert features.release(25) == "4.0-IV3"


def test_unregister_broker_needs_a_fenced_registration() -> None:
    ctl, quorum = controller([1, 2], [], fenced=[2])
    for broker_id, code in ((3, ErrorCode.broker_id_not_registered), (1, ErrorCode.invalid_request)):
        with pytest.raises(KafkaError) as info:
            run(ctl.unregister_broker(broker_id))
        assert info.value.code == code
    run(ctl.unregister_broker(2))
    assert sorted(quorum.image.brokers) == [1]


def test_the_first_registration_pins_the_default_levels_in_the_log() -> None:
    ctl, quorum = controller([], [])
    run(ctl.register_broker(1, uuid.UUID(int=1), (), None))
    assert dict(quorum.image.features) == {"metadata.version": 29, "group.version": 1, "share.version": 1}
    run(ctl.update_features([("group.version", 0, SAFE_DOWNGRADE)], False))
    run(ctl.register_broker(2, uuid.UUID(int=2), (), None))
    assert quorum.image.features["group.version"] == 0  # what was finalized stays
