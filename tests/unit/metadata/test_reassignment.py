"""Partition reassignment in the controller: start, completion as the ISR catches up, cancel, validation; and
the AlterPartition answers around it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import kio.schema.alter_partition.v3.request as ap_req
import kio.schema.alter_partition.v3.response as ap_resp
import pytest

from moldau.metadata import reassignment
from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage, PartitionImage
from moldau.metadata.records import MetadataRecord, PartitionRecord, decode_record, encode_record
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.handlers import alter_partition
from tests.unit.metadata.builders import TOPIC_ID, build, part, partition, registration


class FakeQuorum:
    """The parts of MetadataQuorum the controller uses: every proposal commits and applies at once."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.applied_offset = image.offset + 1
        self.entries: list[list[MetadataRecord]] = []

    def is_active_controller(self) -> bool:
        return True

    def clock_ms(self) -> int:
        return 0

    def next_offset(self) -> int:
        return self.applied_offset

    async def propose(self, records: Sequence[MetadataRecord]) -> int:
        self.entries.append(list(records))
        self.image = self.image.apply(records, self.image.offset + len(records))
        self.applied_offset = self.image.offset + 1
        return self.image.offset


def controller(brokers: Sequence[int], partitions: Sequence[PartitionRecord],
               fenced: Sequence[int] = ()) -> tuple[Controller, FakeQuorum]:
    quorum = FakeQuorum(build([registration(b, fenced=b in fenced) for b in brokers], partitions))
    return Controller(quorum, node_id=1), quorum  # type: ignore[arg-type]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def reassign(ctl: Controller, *changes: tuple[str, int, Sequence[int] | None]) -> list[KafkaError | None]:
    return run(ctl.alter_partition_reassignments(list(changes)))  # type: ignore[no-any-return]


def grow_isr(ctl: Controller, p: PartitionImage, isr: Sequence[int]) -> PartitionImage:
    """The leader's AlterPartition adding followers that caught up."""
    return run(ctl.alter_partition(p.leader, 10, TOPIC_ID, p.partition, p.leader_epoch,  # type: ignore[no-any-return]
                                   p.partition_epoch, tuple(isr)))


def codes(results: list[KafkaError | None]) -> list[ErrorCode]:
    return [ErrorCode.none if r is None else r.code for r in results]


def test_start_lists_target_first_and_keeps_the_isr() -> None:
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2, 3], leader_epoch=2, partition_epoch=5)])
    assert codes(reassign(ctl, ("t", 0, [2, 3, 4]))) == [ErrorCode.none]
    p = part(quorum.image, 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2, 3), 1, 2, 6)
    assert ctl.list_partition_reassignments() == [("t", p)]
    assert ctl.list_partition_reassignments({"t": [1]}) == []
    assert ctl.list_partition_reassignments({"nope": [0]}) == []


def test_completes_when_the_target_is_in_sync_and_moves_the_leader_off_a_removed_replica() -> None:
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2, 3], leader_epoch=2, partition_epoch=5)])
    reassign(ctl, ("t", 0, [4, 2, 3]))
    answer = grow_isr(ctl, part(quorum.image, 0), [1, 2, 3, 4])
    p = part(quorum.image, 0)
    assert answer == p
    # Target order: broker 4 is the preferred leader and in the ISR, so it takes over from the removed broker 1.
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((4, 2, 3), (2, 3, 4), (), ())
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (4, 3, 7)
    assert ctl.list_partition_reassignments() == []
    # The ISR change and the completion are one record in one entry.
    assert len(quorum.entries[-1]) == 1


def test_no_completion_until_every_target_replica_is_in_sync() -> None:
    ctl, quorum = controller([1, 2, 3, 4, 5], [partition(0, [1, 2])])
    reassign(ctl, ("t", 0, [3, 4]))
    grow_isr(ctl, part(quorum.image, 0), [1, 2, 3])
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((3, 4, 1, 2), (1, 2, 3), (3, 4), (1, 2))
    grow_isr(ctl, p, [1, 2, 3, 4])
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((3, 4), (3, 4), 3, 1)


def test_the_leader_stays_when_it_is_in_the_target() -> None:
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2, 3])])
    reassign(ctl, ("t", 0, [1, 4, 3]))
    grow_isr(ctl, part(quorum.image, 0), [1, 2, 3, 4])
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.reassigning) == ((1, 4, 3), (1, 3, 4), 1, 0, False)


def test_a_target_already_in_sync_completes_at_once() -> None:
    ctl, quorum = controller([1, 2, 3], [partition(0, [1, 2, 3], partition_epoch=4)])
    reassign(ctl, ("t", 0, [2, 3]))
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2, 3), (2, 3), 2, 1, 5)
    assert not p.reassigning


def test_the_new_leader_must_be_live() -> None:
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2], isr=[1, 2])], fenced=[2])
    reassign(ctl, ("t", 0, [2, 3]))
    grow_isr(ctl, part(quorum.image, 0), [1, 2, 3])
    p = part(quorum.image, 0)
    # Broker 2 is fenced, so broker 3 leads; broker 1 is gone.
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ((2, 3), (2, 3), 3, False)


def test_same_replicas_is_a_no_op_and_a_reorder_applies_at_once() -> None:
    ctl, quorum = controller([1, 2, 3], [partition(0, [1, 2, 3])])
    assert codes(reassign(ctl, ("t", 0, [1, 2, 3]))) == [ErrorCode.none]
    assert quorum.entries == []
    reassign(ctl, ("t", 0, [3, 1, 2]))
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.leader, p.partition_epoch, p.reassigning) == ((3, 1, 2), (1, 2, 3), 1, 1, False)


def test_cancel_reverts_to_the_original_replicas() -> None:
    ctl, quorum = controller([1, 2, 3, 4, 5], [partition(0, [1, 2, 3], partition_epoch=3)])
    reassign(ctl, ("t", 0, [4, 5, 3]))
    grow_isr(ctl, part(quorum.image, 0), [1, 2, 3, 4])
    assert codes(reassign(ctl, ("t", 0, None))) == [ErrorCode.none]
    p = part(quorum.image, 0)
    # The current replicas without those being added, in their current order (as Kafka reverts).
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((3, 1, 2), (1, 2, 3), 1, (), ())
    assert p.partition_epoch == 6
    assert codes(reassign(ctl, ("t", 0, None))) == [ErrorCode.no_reassignment_in_progress]


def test_cancel_elects_a_new_leader_if_an_added_replica_led() -> None:
    ctl, quorum = controller([1, 2, 3], [partition(0, [1, 2])])
    reassign(ctl, ("t", 0, [3, 2]))
    # Broker 3 caught up and leads meanwhile (say broker 1 was restarted and 3 elected as preferred).
    image = quorum.image
    p = part(image, 0)
    forced = PartitionRecord(TOPIC_ID, 0, p.replicas, (3, 2, 1), 3, p.leader_epoch + 1, p.partition_epoch + 1,
                             p.adding_replicas, p.removing_replicas)
    quorum.image = image.apply([forced], image.offset + 1)
    reassign(ctl, ("t", 0, None))
    p = part(quorum.image, 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((2, 1), (2, 1), 2, 2)


def test_a_new_target_replaces_the_ongoing_one_from_the_original_replicas() -> None:
    ctl, quorum = controller([1, 2, 3, 4, 5], [partition(0, [1, 2])])
    reassign(ctl, ("t", 0, [3, 4]))
    reassign(ctl, ("t", 0, [1, 5]))
    p = part(quorum.image, 0)
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr) == ((1, 5, 2), (5,), (2,), (1, 2))
    # Back to the original replicas: the same as a cancel.
    reassign(ctl, ("t", 0, [1, 2]))
    p = part(quorum.image, 0)
    assert (p.replicas, p.reassigning) == ((1, 2), False)


def test_validation_errors() -> None:
    ctl, quorum = controller([1, 2, 3], [partition(0, [1, 2])])
    changes: list[tuple[str, int, list[int] | None]] = [
        ("nope", 0, [1]), ("t", 7, [1]), ("t", 0, []), ("t", 0, [1, 1]), ("t", 0, [1, 9]), ("t", 0, None)]
    assert [code for change in changes for code in codes(reassign(ctl, change))] == [
        ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_replica_assignment, ErrorCode.invalid_replica_assignment,
        ErrorCode.invalid_replica_assignment, ErrorCode.no_reassignment_in_progress]
    assert quorum.entries == []
    assert codes(reassign(ctl, ("t", 0, [2, 3]), ("t", 0, [1, 3]))) == [ErrorCode.none, ErrorCode.invalid_request]


def test_valid_changes_of_one_request_commit_as_one_entry_despite_errors() -> None:
    ctl, quorum = controller([1, 2, 3], [partition(0, [1]), partition(1, [2])])
    assert codes(reassign(ctl, ("t", 0, [2]), ("t", 9, [1]), ("t", 1, [3]))) == [
        ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.none]
    assert len(quorum.entries) == 1 and len(quorum.entries[0]) == 2


def test_a_revert_that_leaves_no_replica_in_sync_is_refused() -> None:
    # Only broker 4, being added, is in sync (the original replicas were lost): reverting would lose its records.
    moving = PartitionImage(0, (4, 1), (4,), 4, 1, 1, adding_replicas=(4,), removing_replicas=(1,))
    with pytest.raises(KafkaError) as info:
        reassignment.cancel(TOPIC_ID, moving, lambda b: True)
    assert info.value.code == ErrorCode.invalid_replica_assignment


def test_isr_changes_keep_the_reassignment() -> None:
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2, 3])])
    reassign(ctl, ("t", 0, [1, 2, 4]))
    grow_isr(ctl, part(quorum.image, 0), [1, 2])
    p = part(quorum.image, 0)
    assert (p.isr, p.adding_replicas, p.removing_replicas) == ((1, 2), (4,), (3,))


def test_records_without_reassignment_fields_still_decode() -> None:
    old = b'{"topic_id":"00000000-0000-0000-0000-000000000001","partition":0,"replicas":[1,2],"isr":[1],' \
          b'"leader":1,"leader_epoch":0,"partition_epoch":0,"type":"partition"}'
    record = decode_record(old)
    assert isinstance(record, PartitionRecord)
    assert (record.adding_replicas, record.removing_replicas) == ((), ())
    moving = PartitionRecord(TOPIC_ID, 0, (2, 3, 1), (1, 2), 1, 0, 1, (3,), (1,))
    assert json.loads(encode_record(moving))["adding_replicas"] == [3]
    assert decode_record(encode_record(moving)) == moving


def test_snapshots_keep_reassignments() -> None:
    moving = PartitionRecord(TOPIC_ID, 0, (2, 3, 1), (1, 2), 1, 0, 1, (3,), (1,))
    image = build([registration(b) for b in (1, 2, 3)], [moving])
    records = image.to_records()
    rebuilt = MetadataImage().apply(records, image.offset)
    assert part(rebuilt, 0) == part(image, 0)
    assert part(rebuilt, 0).target_replicas == (2, 3)


def alter_partition_answer(ctl: Controller, p: PartitionImage, isr: Sequence[tuple[int, int]]) -> Any:
    """The AlterPartition v3 handler's answer for one partition; `isr` as (broker id, broker epoch)."""
    members = tuple(make(ap_req.BrokerState, broker_id=b, broker_epoch=e) for b, e in isr)
    data = make(ap_req.PartitionData, partition_index=p.partition, leader_epoch=p.leader_epoch,
                new_isr_with_epochs=members, partition_epoch=p.partition_epoch)
    request = make(ap_req.AlterPartitionRequest, broker_id=p.leader, broker_epoch=10,
                   topics=(make(ap_req.TopicData, topic_id=TOPIC_ID, partitions=(data,)),))
    response = run(alter_partition.serve(ctl, request, ap_resp, ap_resp.AlterPartitionResponse))
    return response.topics[0].partitions[0]


def test_a_completion_that_moves_leadership_off_the_sender_is_answered_new_leader_elected() -> None:
    """Applied, but the sender no longer leads: it must not take the answer's ISR for its own (Kafka's answer)."""
    ctl, quorum = controller([1, 2, 3, 4], [partition(0, [1, 2, 3], leader_epoch=2, partition_epoch=5)])
    reassign(ctl, ("t", 0, [4, 2, 3]))
    answer = alter_partition_answer(ctl, part(quorum.image, 0), [(1, -1), (2, 10), (3, 10), (4, 10)])
    assert answer.error_code == ErrorCode.new_leader_elected
    p = part(quorum.image, 0)
    assert (p.leader, p.isr, p.reassigning) == (4, (2, 3, 4), False)


def test_a_member_that_registered_again_since_its_fetch_may_not_join() -> None:
    """KIP-903: the leader saw broker 3 fetch at epoch 9; it has registered again (epoch 10) since, maybe having
    lost what that fetch reported."""
    ctl, quorum = controller([1, 2, 3], [partition(0, [1, 2, 3], isr=[1, 2], partition_epoch=5)])
    stale = alter_partition_answer(ctl, part(quorum.image, 0), [(1, -1), (2, -1), (3, 9)])
    assert stale.error_code == ErrorCode.ineligible_replica
    for hostile in (-5, 2**63 - 1, -(2**63)):  # only -1 asks for no check
        answer = alter_partition_answer(ctl, part(quorum.image, 0), [(1, -1), (2, -1), (3, hostile)])
        assert answer.error_code == ErrorCode.ineligible_replica, hostile
    assert part(quorum.image, 0).isr == (1, 2)
    current = alter_partition_answer(ctl, part(quorum.image, 0), [(1, -1), (2, -1), (3, 10)])
    assert (current.error_code, current.isr, current.leader_id) == (ErrorCode.none, (1, 2, 3), 1)
