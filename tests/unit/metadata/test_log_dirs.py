"""Directory assignments and offline directories in the controller (KIP-858): pure decisions on small images."""

from __future__ import annotations

import uuid
from dataclasses import replace

from moldau.metadata.broker_heartbeats import decide
from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.log_dirs import assignment_changes
from moldau.metadata.records import BrokerRegistrationChangeRecord, FenceBrokerRecord, PartitionRecord
from moldau.protocol.errors import ErrorCode
from tests.unit.metadata.builders import TOPIC_ID, build, part, partition, registration
from tests.unit.metadata.test_reassignment import FakeQuorum, run

A, B = "dir-a", "dir-b"


def _image() -> MetadataImage:
    """Broker 1 leads partitions 0 and 1 (replicas 1, 2, 3), partition 0 in its directory A and 1 in B."""
    brokers = [replace(registration(1), log_dirs=(A, B)), registration(2), registration(3)]
    image = build(brokers, [partition(0, [1, 2, 3]), partition(1, [1, 2, 3])])
    records, outcomes = assignment_changes(image, 1, [(A, TOPIC_ID, 0), (B, TOPIC_ID, 1)])
    assert set(outcomes.values()) == {ErrorCode.none}
    return image.apply(records, image.offset + 1)


def test_assignments_are_recorded_and_kept_across_leadership_changes() -> None:
    image = _image()
    assert part(image, 0).directory_of(1) == A and part(image, 1).directory_of(1) == B
    assert part(image, 0).directory_of(2) == ""
    p = part(image, 0)
    moved = image.apply([PartitionRecord(TOPIC_ID, 0, p.replicas, (2, 3), 2, 1, 1)], image.offset + 1)
    assert part(moved, 0).directory_of(1) == A


def test_an_offline_directory_moves_leadership_of_its_replicas_only() -> None:
    image = _image()
    decision = decide(image, 1, 10, 10, False, False, offline_dirs=[B])
    assert decision.records[0] == BrokerRegistrationChangeRecord(1, 10, (A,))
    after = image.apply(decision.records, image.offset + 1)
    assert part(after, 1).leader == 2 and part(after, 1).leader_epoch == 1 and part(after, 1).isr == (2, 3)
    assert part(after, 0) == part(image, 0)
    assert not decision.is_fenced
    # Reported again: nothing more to do.
    assert decide(after, 1, 10, 10, False, False, offline_dirs=[B]).records == []


def test_every_directory_offline_fences_the_broker() -> None:
    decision = decide(_image(), 1, 10, 10, False, False, offline_dirs=[A, B])
    assert isinstance(decision.records[0], FenceBrokerRecord) and decision.is_fenced


def test_a_replica_assigned_to_a_directory_not_online_leaves_leadership() -> None:
    image = _image()
    records, _ = assignment_changes(image, 1, [("lost-dir", TOPIC_ID, 0)])
    after = image.apply(records, image.offset + 1)
    assert part(after, 0).leader == 2 and 1 not in part(after, 0).isr


def test_assignment_errors() -> None:
    image = _image()
    _, outcomes = assignment_changes(image, 4, [(A, TOPIC_ID, 0)])
    assert outcomes == {(TOPIC_ID, 0): ErrorCode.not_leader_or_follower}
    _, outcomes = assignment_changes(image, 1, [(A, TOPIC_ID, 9), (A, uuid.UUID(int=99), 0)])
    assert outcomes == {(TOPIC_ID, 9): ErrorCode.unknown_topic_or_partition,
                        (uuid.UUID(int=99), 0): ErrorCode.unknown_topic_id}


def test_a_new_replica_is_assigned_to_its_brokers_only_directory_at_once() -> None:
    # Broker 1 has two directories (it says where, with AssignReplicasToDirs), broker 2 one, broker 3 did not list
    # its directories.
    brokers = [replace(registration(1), log_dirs=(A, B)), replace(registration(2), log_dirs=(A,)), registration(3)]
    ctl = Controller(FakeQuorum(build(brokers)), node_id=1)  # type: ignore[arg-type]
    run(ctl.create_topic("spread", -1, -1, {0: [1, 2, 3]}, {}))
    run(ctl.create_topic("lone", -1, -1, {0: [2], 1: [2]}, {}))
    run(ctl.create_topic("undecided", -1, -1, {0: [1, 3]}, {}))
    run(ctl.create_partitions("lone", 3, [[2]]))
    image = ctl.image
    assert image.topics_by_name["spread"].partitions[0].directories == ("", A, "")
    assert [p.directory_of(2) for p in image.topics_by_name["lone"].partitions.values()] == [A, A, A]
    assert image.topics_by_name["undecided"].partitions[0].directories == ()
